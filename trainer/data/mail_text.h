// What the classifier and MLM see of a raw SpamAssassin mail: the Subject and From headers and
// the body, with the transport noise taken out (other headers, MIME part headers and boundaries,
// base64 blocks, quoted-printable escapes, HTML tags and entities, long runs of one character).
// The rules are listed in docs/data.md.
#pragma once

#include <string>
#include <string_view>

namespace kolo::trainer {

// "<subject>\n<from>\n<body>" of one raw RFC 822 message (bytes as stored in the .txt files).
std::string mail_text(std::string_view raw);

// The pieces, exposed for tests.
namespace mail {
// The unfolded value of the first header `name` (case-insensitive) in the header block, with
// RFC 2047 encoded words (=?charset?Q|B?...?=) decoded to their bytes; "" when absent.
std::string header_value(std::string_view headers, std::string_view name);
// Body cleanup: see the file comment. `quoted_printable` turns on =XX / soft-break decoding.
std::string clean_body(std::string_view body, bool quoted_printable);
}  // namespace mail

}  // namespace kolo::trainer
