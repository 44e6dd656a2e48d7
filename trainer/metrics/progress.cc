// ProgressPrinter: bar and fields redrawn with \r and erase-to-end-of-line on a terminal,
// plain lines elsewhere.
#include "trainer/metrics/progress.h"

#include <unistd.h>

#include <algorithm>

namespace kolo::trainer {

namespace {

std::string printf_string(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace

std::string format_progress(const ProgressLine& line, const std::string& rate_unit) {
  std::string s = "step " + std::to_string(line.step);
  if (line.total_steps > 0) s += "/" + std::to_string(line.total_steps);
  s += " | loss " + printf_string("%.4f", line.loss);
  s += " | scale " + printf_string("%g", line.loss_scale);
  s += " | lr " + printf_string("%.3e", line.lr);
  s += " | " + rate_unit + " " + printf_string("%.1f", line.rate);
  for (const auto& [key, value] : line.extras) s += " | " + key + "=" + value;
  return s;
}

std::string format_bar(int64_t done, int64_t total, int width) {
  const double frac = total > 0 ? std::clamp(double(done) / double(total), 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(frac * width);
  std::string bar = "[" + std::string(filled, '=');
  if (filled < width) bar += ">" + std::string(width - filled - 1, ' ');
  bar += "] " + printf_string("%3.0f", frac * 100) + "%";
  return bar;
}

ProgressPrinter::ProgressPrinter(ProgressOptions options)
    : options_(std::move(options)),
      tty_(options_.out != nullptr &&
           (options_.tty < 0 ? isatty(fileno(options_.out)) == 1 : options_.tty == 1)) {}

ProgressPrinter::~ProgressPrinter() {
  finish();
}

void ProgressPrinter::report(const ProgressLine& line) {
  if (options_.out == nullptr) return;
  const std::string fields = format_progress(line, options_.rate_unit);
  if (!tty_) {
    std::fprintf(options_.out, "%s\n", fields.c_str());
  } else {
    // \r returns to the line start, ESC[K erases what a longer previous line left behind.
    const std::string bar = line.total_steps > 0
                                ? format_bar(line.step, line.total_steps, options_.bar_width) + " "
                                : std::string();
    std::fprintf(options_.out, "\r%s%s\033[K", bar.c_str(), fields.c_str());
    open_line_ = true;
  }
  std::fflush(options_.out);
}

void ProgressPrinter::message(const std::string& text) {
  if (options_.out == nullptr) return;
  finish();
  std::fprintf(options_.out, "%s\n", text.c_str());
  std::fflush(options_.out);
}

void ProgressPrinter::finish() {
  if (!open_line_) return;
  std::fprintf(options_.out, "\n");
  std::fflush(options_.out);
  open_line_ = false;
}

}  // namespace kolo::trainer
