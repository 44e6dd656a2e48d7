// Turning a raw mail into the text the tokenizer sees; mail_text.h says what is kept.
#include "trainer/data/mail_text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "trainer/data/unicode.h"

namespace kolo::trainer {
namespace {

constexpr size_t kMaxRun = 3;  // "!!!!!!!!" and "______" rows keep 3 characters

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), text.begin(),
                    [](char a, char b) { return lower(a) == lower(b); });
}

bool contains_nocase(std::string_view text, std::string_view needle) {
  return std::search(text.begin(), text.end(), needle.begin(), needle.end(),
                     [](char a, char b) { return lower(a) == lower(b); }) != text.end();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string decode_base64(std::string_view text) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    const int v = base64_value(c);
    if (v < 0) continue;  // padding and line breaks
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if ((count += 6) >= 8) out += static_cast<char>((bits >> (count -= 8)) & 0xFF);
  }
  return out;
}

// =XX escapes; in headers (RFC 2047 Q encoding) '_' is a space, in bodies "=\n" is a soft break.
std::string decode_quoted_printable(std::string_view text, bool header) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_' && header) {
      out += ' ';
    } else if (c == '=' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      i += (text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n') ? 2 : 1;
    } else if (c == '=' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
               hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

// RFC 2047: =?charset?Q?text?= or =?charset?B?text?=; the charset is ignored (the tokenizer
// reads the bytes as UTF-8, falling back to Latin-1).
std::string decode_encoded_words(std::string_view value) {
  std::string out;
  size_t pos = 0;
  while (pos < value.size()) {
    const size_t start = value.find("=?", pos);
    const size_t q1 = start == std::string_view::npos ? start : value.find('?', start + 2);
    const size_t q2 = q1 == std::string_view::npos ? q1 : value.find('?', q1 + 1);
    const size_t end = q2 == std::string_view::npos ? q2 : value.find("?=", q2 + 1);
    if (end == std::string_view::npos || q2 != q1 + 2) {
      out.append(value.substr(pos));
      break;
    }
    out.append(value.substr(pos, start - pos));
    const std::string_view payload = value.substr(q2 + 1, end - q2 - 1);
    const char encoding = lower(value[q1 + 1]);
    out += encoding == 'b' ? decode_base64(payload) : decode_quoted_printable(payload, true);
    pos = end + 2;
  }
  return out;
}

// Calls on_line(line) for each line of text, without its "\n" or "\r\n".
template <typename F>
void for_each_line(std::string_view text, F&& on_line) {
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    on_line(line);
    pos = end + 1;
  }
}

bool is_base64_line(std::string_view line) {
  return line.size() >= 40 && std::all_of(line.begin(), line.end(),
                                          [](char c) { return base64_value(c) >= 0 || c == '='; });
}

// MIME scaffolding inside a body: part headers and boundary lines carry no content.
bool is_mime_line(std::string_view line) {
  if (starts_with_nocase(line, "content-") || starts_with_nocase(line, "mime-version:"))
    return true;
  return line.size() >= 8 && line.starts_with("--") &&
         line.find_first_of(" \t") == std::string_view::npos;
}

// "&amp;", "&#233;", "&#xE9;" ... at text[pos] ('&'): appends the character, returns the length
// consumed, or 0 when this is no entity kolo knows (the '&' is then kept as it is).
size_t decode_entity(std::string_view text, size_t pos, std::string& out) {
  static constexpr std::pair<std::string_view, std::string_view> kNamed[] = {
      {"&nbsp;", " "},      {"&amp;", "&"},      {"&lt;", "<"},
      {"&gt;", ">"},        {"&quot;", "\""},    {"&apos;", "'"},
      {"&copy;", "\u00A9"}, {"&reg;", "\u00AE"}, {"&pound;", "\u00A3"}};
  const std::string_view rest = text.substr(pos, 12);
  for (const auto& [name, value] : kNamed) {
    if (starts_with_nocase(rest, name)) {
      out.append(value);
      return name.size();
    }
  }
  if (rest.size() < 4 || rest[1] != '#') return 0;
  const bool hex = rest[2] == 'x' || rest[2] == 'X';
  char32_t cp = 0;
  size_t i = hex ? 3 : 2;
  for (; i < rest.size() && rest[i] != ';'; ++i) {
    const int digit =
        hex ? hex_value(rest[i])
            : (std::isdigit(static_cast<unsigned char>(rest[i])) ? rest[i] - '0' : -1);
    if (digit < 0) return 0;
    cp = cp * (hex ? 16 : 10) + static_cast<char32_t>(digit);
  }
  if (i >= rest.size() || i == (hex ? 3u : 2u) || cp == 0 || cp > 0x10FFFF) return 0;
  unicode::append_utf8(out, cp);
  return i + 1;
}

// Drops HTML tags (the contents of <style> and <script> too) and decodes entities. A tag is
// replaced by a space so that table cells and paragraphs stay separate words.
std::string strip_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  // Linear time on any input: once a search for '>' (or for a closing </style, </script)
  // from some position fails, every later search from further on fails too, so it is not
  // repeated ("<a<a<a..." without any '>' was quadratic).
  size_t no_gt_from = std::string_view::npos, no_style_from = std::string_view::npos,
         no_script_from = std::string_view::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '<' &&
        (std::isalpha(static_cast<unsigned char>(next)) || next == '/' || next == '!')) {
      const std::string_view tag = text.substr(i);
      std::string_view closing;
      size_t* none_from = nullptr;
      if (starts_with_nocase(tag, "<style")) {
        closing = "</style";
        none_from = &no_style_from;
      }
      if (starts_with_nocase(tag, "<script")) {
        closing = "</script";
        none_from = &no_script_from;
      }
      size_t end = i;
      if (!closing.empty()) {
        if (i >= *none_from) {
          end = text.size();
        } else {
          const auto it = std::search(tag.begin(), tag.end(), closing.begin(), closing.end(),
                                      [](char a, char b) { return lower(a) == lower(b); });
          if (it == tag.end()) *none_from = i;
          end = i + static_cast<size_t>(it - tag.begin());
        }
      }
      const size_t from = end;
      end = from >= no_gt_from ? std::string_view::npos : text.find('>', from);
      if (end == std::string_view::npos) no_gt_from = std::min(no_gt_from, from);
      if (end != std::string_view::npos) {
        out += ' ';
        i = end;
        continue;
      }
    }
    const size_t entity = c == '&' ? decode_entity(text, i, out) : 0;
    if (entity > 0) {
      i += entity - 1;
      continue;
    }
    out += c;
  }
  return out;
}

// Whitespace runs become one space; a run of one ASCII punctuation character keeps kMaxRun.
std::string squeeze(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t run = 0;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
      run = 0;
      continue;
    }
    run = (!out.empty() && out.back() == c) ? run + 1 : 1;
    if (run > kMaxRun && std::ispunct(static_cast<unsigned char>(c))) continue;
    out += c;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

namespace mail {

std::string header_value(std::string_view headers, std::string_view name) {
  std::string value;
  bool in_header = false;
  bool done = false;
  for_each_line(headers, [&](std::string_view line) {
    if (done) return;
    const bool continuation = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    if (in_header && continuation) {
      value.append(" ").append(line.substr(1));
    } else if (in_header) {
      done = true;
    } else if (starts_with_nocase(line, name) && line.size() > name.size() &&
               line[name.size()] == ':') {
      in_header = true;
      value.assign(line.substr(name.size() + 1));
    }
  });
  const std::string decoded = decode_encoded_words(value);
  const size_t first = decoded.find_first_not_of(" \t");
  const size_t last = decoded.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : decoded.substr(first, last - first + 1);
}

std::string clean_body(std::string_view body, bool quoted_printable) {
  const std::string decoded = quoted_printable ? decode_quoted_printable(body, false) : "";
  const std::string_view text = quoted_printable ? std::string_view(decoded) : body;
  std::string kept;
  kept.reserve(text.size());
  for_each_line(text, [&](std::string_view line) {
    if (is_mime_line(line) || is_base64_line(line)) return;
    kept.append(line).append("\n");
  });
  return squeeze(strip_html(kept));
}

}  // namespace mail

std::string mail_text(std::string_view raw) {
  size_t split = raw.find("\n\n");
  const size_t crlf = raw.find("\r\n\r\n");
  if (crlf != std::string_view::npos && crlf < split) split = crlf;
  const std::string_view headers = raw.substr(0, split);
  std::string_view body = split == std::string_view::npos ? "" : raw.substr(split);
  // A single-part text mail sent in base64 is decoded; base64 attachments are dropped later.
  std::string decoded;
  const std::string encoding = mail::header_value(headers, "Content-Transfer-Encoding");
  if (contains_nocase(encoding, "base64") &&
      starts_with_nocase(mail::header_value(headers, "Content-Type"), "text")) {
    decoded = decode_base64(body);
    body = decoded;
  }
  const bool quoted_printable = contains_nocase(raw, "quoted-printable");
  return squeeze(mail::header_value(headers, "Subject")) + "\n" +
         squeeze(mail::header_value(headers, "From")) + "\n" +
         mail::clean_body(body, quoted_printable);
}

}  // namespace kolo::trainer
