// Progress reporting of the training programs: one line per report with step, loss, loss
// scale, learning rate and throughput (plus extra key=value pairs); on a terminal the line is
// redrawn in place (\r) behind a progress bar, otherwise plain lines suitable for log files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace kolo::trainer {

struct ProgressLine {
  int64_t step = 0;         // steps done (1-based after the first)
  int64_t total_steps = 0;  // 0: unknown (no bar, no "/total")
  double loss = 0;
  double loss_scale = 1;
  double lr = 0;
  double rate = 0;                                          // units per second
  std::vector<std::pair<std::string, std::string>> extras;  // printed as key=value
};

struct ProgressOptions {
  std::FILE* out = stdout;             // null: print nothing (data-parallel ranks other than 0)
  int tty = -1;                        // -1: isatty(fileno(out)); 0 plain lines; 1 terminal
  std::string rate_unit = "tokens/s";  // or "samples/s"
  int bar_width = 30;
};

// "step 450/1000 | loss 2.3451 | scale 65536 | lr 3.000e-04 | tokens/s 12345.6 | acc=0.91"
std::string format_progress(const ProgressLine& line, const std::string& rate_unit);
// "[=============>                ]  45%" for done/total (total > 0).
std::string format_bar(int64_t done, int64_t total, int width);

class ProgressPrinter {
 public:
  explicit ProgressPrinter(ProgressOptions options = {});
  ~ProgressPrinter();  // finishes a bar line that is still open

  bool is_terminal() const { return tty_; }
  // Terminal: redraws the current line (bar + fields). Otherwise: prints one line.
  void report(const ProgressLine& line);
  // A line that must stay (evaluation results, warnings): ends an open bar line first.
  void message(const std::string& text);
  // Ends the open bar line with a newline (terminal); nothing otherwise.
  void finish();

 private:
  ProgressOptions options_;
  bool tty_;
  bool open_line_ = false;
};

}  // namespace kolo::trainer
