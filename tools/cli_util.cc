// Command-line checks shared by the `weft` subcommands (see cli_util.h).
#include "tools/cli_util.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/error.h"
#include "capi/plugin.h"
#include "devices/device_api.h"

namespace weft::tools {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

constexpr int kMaxSpecDims = 32;

}  // namespace

CLI::Validator integer_in(int64_t min, int64_t max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        const std::string_view digits =
            !text.empty() && text[0] == '-' ? std::string_view(text).substr(1) : text;
        int64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!all_digits(digits) || ec == std::errc::invalid_argument ||
            end != text.data() + text.size()) {
          return "'" + text + "' is not a decimal integer (expected one in " + range + ")";
        }
        if (ec == std::errc::result_out_of_range || value < min || value > max) {
          return "'" + text + "' is out of range (expected an integer in " + range + ")";
        }
        text = std::to_string(value);  // canonical: no leading zeros CLI11 would read as octal
        return {};
      },
      "INT in " + range);
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!all_digits(text) || end != text.data() + text.size()) {
          return "'" + text + "' is not a non-negative decimal integer";
        }
        if (ec == std::errc::result_out_of_range) {
          return "'" + text + "' is out of range (expected an integer in [0, 2^64 - 1])";
        }
        text = std::to_string(value);
        return {};
      },
      "UINT64");
}

CLI::Validator non_negative_finite() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() ||
            std::isspace(static_cast<unsigned char>(text[0]))) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(value) || value < 0) {
          return "'" + text + "' is out of range (expected a finite number >= 0)";
        }
        return {};
      },
      "FLOAT >= 0");
}

CLI::Validator device_text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_device(text);
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      "DEVICE");
}

Device runnable_device(const std::string& flag, const std::string& text) {
  Device d;
  try {
    d = parse_device(text);
  } catch (const Error& e) {
    WEFT_THROW(ValueError) << flag << ": " << e.what();
  }
  if (d.type == DeviceType::kCPU) return d;
  WEFT_CHECK(d.type == DeviceType::kCUDA)
      << flag << " '" << text << "': " << to_string(d)
      << " is page-locked host memory, not a device that runs kernels; use cpu or cuda:N";
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  WEFT_CHECK(api != nullptr) << flag << " '" << text
                             << "': this weft is built without CUDA (configure with "
                                "-DWEFT_USE_CUDA=ON where the CUDA toolkit is installed)";
  const int count = api->device_count();
  WEFT_CHECK(d.id < count) << flag << " '" << text << "': no such device (" << count
                           << " CUDA device" << (count == 1 ? "" : "s") << " found)";
  return d;
}

Shape parse_shape_spec(const std::string& text) {
  std::string_view s = trim(text);
  const char* form = "1x3x224x224, (1,3,224,224) or [1, 3, 224, 224]";
  if (!s.empty() && (s.front() == '(' || s.front() == '[')) {
    const char close = s.front() == '(' ? ')' : ']';
    WEFT_CHECK(s.size() >= 2 && s.back() == close)
        << "bad shape '" << text << "': unbalanced brackets (expected " << form << ")";
    s = trim(s.substr(1, s.size() - 2));
    if (!s.empty() && s.back() == ',') s = trim(s.substr(0, s.size() - 1));  // "(3,)"
  }
  const char sep = s.find(',') != std::string_view::npos ? ',' : 'x';
  std::vector<int64_t> dims;
  while (!s.empty() || dims.empty()) {
    const size_t at = s.find(sep);
    const std::string_view item = trim(s.substr(0, at));
    WEFT_CHECK(all_digits(item)) << "bad shape '" << text << "': "
                                 << (item.empty() ? std::string("an empty dimension")
                                                  : "'" + std::string(item) +
                                                        "' is not a positive "
                                                        "decimal integer")
                                 << " (expected " << form << ")";
    int64_t d = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    WEFT_CHECK(ec == std::errc() && end == item.data() + item.size())
        << "bad shape '" << text << "': dimension " << dims.size() << " ('" << item
        << "') is too large";
    WEFT_CHECK(d > 0) << "bad shape '" << text << "': dimension " << dims.size()
                      << " is 0 (dimensions must be positive)";
    dims.push_back(d);
    WEFT_CHECK(dims.size() <= kMaxSpecDims)
        << "bad shape '" << text << "': more than " << kMaxSpecDims << " dimensions";
    if (at == std::string_view::npos) break;
    s = s.substr(at + 1);
    WEFT_CHECK(!trim(s).empty()) << "bad shape '" << text
                                 << "': an empty dimension after the last '" << sep
                                 << "' (expected " << form << ")";
  }
  Shape shape(dims);
  try {
    (void)shape.size();  // throws ShapeError past weft's limit for one array
  } catch (const Error& e) {
    WEFT_THROW(ValueError) << "bad shape '" << text << "': " << e.what();
  }
  return shape;
}

InputSpec parse_input_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  WEFT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size())
      << "--input '" << spec << "': expected NAME=SHAPE (e.g. data=1x3x224x224) or NAME=FILE.npy";
  InputSpec out;
  out.name = spec.substr(0, eq);
  const std::string value = spec.substr(eq + 1);
  if (value.ends_with(".npy")) {
    out.file = value;
    return out;
  }
  try {
    out.shape = parse_shape_spec(value);
  } catch (const Error& e) {
    WEFT_THROW(ValueError) << "--input '" << spec << "': " << e.what();
  }
  return out;
}

bool interactive_terminal() { return isatty(STDOUT_FILENO) == 1 && isatty(STDERR_FILENO) == 1; }

void ProgressBar::update(int done) {
  if (!enabled_ || total_ <= 0) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(static_cast<int64_t>(done) * kWidth / total_);
  std::fprintf(stderr, "\r  [%s%s] %d/%d", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total_);
  if (done >= total_) std::fputc('\n', stderr);
  std::fflush(stderr);
}

void add_plugin_option(CLI::App& app, std::vector<std::string>& paths) {
  app.add_option("--plugin", paths,
                 "Load this weft plugin (shared library) before reading the graph; repeatable")
      ->allow_extra_args(false);
}

void load_plugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    WEFT_CHECK(!path.empty()) << "--plugin: the path is empty";
    // A file path, as every other path on the command line: dlopen would search the library
    // path for a name without a slash (and not the current directory).
    const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
    try {
      load_plugin(file);
    } catch (const std::exception& e) {
      WEFT_THROW(ValueError) << "--plugin: " << e.what();
    }
  }
}

}  // namespace weft::tools
