// safetensors format and layout I/O: bitwise round trips of every dtype, the byte layout of the
// header, atomic replacement, and errors that name the file and tensor.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmath>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/io/safetensors.h"
#include "trainer/io/tensor_io.h"

namespace kolo::trainer {
namespace {

namespace fs = std::filesystem;

class ModelSafetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kolo_st_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  std::vector<uint8_t> bytes(const std::string& p) const {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write_bytes(const std::string& p, const std::vector<uint8_t>& b) const {
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  }
  // A file with the given header text and `data` zero bytes of data; returns its path.
  std::string raw(const char* name, const std::string& header, size_t data) const {
    std::vector<uint8_t> out(8, 0);
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(header.size() >> (8 * i));
    out.insert(out.end(), header.begin(), header.end());
    out.resize(out.size() + data, 0);
    write_bytes(path(name), out);
    return path(name);
  }
  fs::path dir_;
};

template <typename T>
std::vector<T> pattern(size_t n, uint32_t seed) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t x = (static_cast<uint32_t>(i) + seed) * 2654435761u;
    std::memcpy(&v[i], &x, std::min(sizeof(T), sizeof(x)));
  }
  return v;
}

TEST_F(ModelSafetensors, RoundTripIsBitwiseForEveryDtype) {
  auto f32 = pattern<uint32_t>(6, 1);  // raw bit patterns, NaN payloads included
  auto f16 = pattern<uint16_t>(5, 2);
  auto bf16 = pattern<uint16_t>(7, 3);
  auto i32 = pattern<int32_t>(4, 4);
  auto i64 = pattern<int64_t>(3, 5);
  auto u8 = pattern<uint8_t>(9, 6);
  auto f64 = pattern<uint64_t>(2, 7);
  auto i8 = pattern<int8_t>(5, 8);
  auto i16 = pattern<int16_t>(3, 9);
  float scalar = 3.5f;
  std::vector<TensorRef> refs = {{"a.f32", DType::kFloat32, {2, 3}, f32.data()},
                                 {"b.f16", DType::kFloat16, {5}, f16.data()},
                                 {"c.bf16", DType::kBFloat16, {7, 1}, bf16.data()},
                                 {"d.i32", DType::kInt32, {4}, i32.data()},
                                 {"e.i64", DType::kInt64, {3}, i64.data()},
                                 {"f.empty", DType::kFloat32, {0, 4}, nullptr},
                                 {"g.scalar", DType::kFloat32, {}, &scalar},
                                 {"h.u8", DType::kUInt8, {3, 3}, u8.data()},
                                 {"i.f64", DType::kFloat64, {2}, f64.data()},
                                 {"j.i8", DType::kInt8, {5}, i8.data()},
                                 {"k.i16", DType::kInt16, {1, 3}, i16.data()}};
  write_safetensors(path("t.safetensors"), refs, {{"format", "pt"}, {"step", "12"}});

  SafetensorsFile file(path("t.safetensors"));
  ASSERT_EQ(file.tensors().size(), refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    const auto& e = file.tensors()[i];  // file order is write order
    EXPECT_EQ(e.name, refs[i].name);
    EXPECT_EQ(e.dtype, refs[i].dtype);
    EXPECT_EQ(e.shape, refs[i].shape);
    if (e.bytes > 0) {
      EXPECT_EQ(std::memcmp(e.data, refs[i].data, e.bytes), 0) << e.name;
    }
  }
  EXPECT_EQ(file.find("e.i64").numel(), 3u);
  EXPECT_EQ(file.find("f.empty").bytes, 0u);
  EXPECT_EQ(file.metadata().at("step"), "12");
  EXPECT_EQ(file.get("absent"), nullptr);
}

TEST_F(ModelSafetensors, HeaderFollowsTheFormat) {
  std::vector<uint16_t> h = {1, 2, 3};
  std::vector<float> f = {1.0f, 2.0f};
  write_safetensors(path("h.safetensors"), {{"x", DType::kBFloat16, {3}, h.data()},
                                            {"y", DType::kFloat32, {1, 2}, f.data()}});
  std::vector<uint8_t> b = bytes(path("h.safetensors"));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(b[i]) << (8 * i);  // little-endian length
  EXPECT_EQ(n % 8, 0u) << "data section must start 8-byte aligned";
  ASSERT_EQ(b.size(), 8 + n + 6 + 8);
  auto header = nlohmann::json::parse(b.begin() + 8, b.begin() + 8 + n);
  EXPECT_EQ(header["x"]["dtype"], "BF16");
  EXPECT_EQ(header["x"]["data_offsets"], nlohmann::json::array({0, 6}));
  EXPECT_EQ(header["y"]["dtype"], "F32");
  EXPECT_EQ(header["y"]["shape"], nlohmann::json::array({1, 2}));
  EXPECT_EQ(header["y"]["data_offsets"], nlohmann::json::array({6, 14}));
  EXPECT_FALSE(header.contains("__metadata__"));
}

TEST_F(ModelSafetensors, WriteReplacesAtomicallyAndLeavesNoTemporary) {
  float a = 1.0f, b = 2.0f;
  write_safetensors(path("w.safetensors"), {{"v", DType::kFloat32, {1}, &a}});
  write_safetensors(path("w.safetensors"), {{"v", DType::kFloat32, {1}, &b}});
  SafetensorsFile file(path("w.safetensors"));
  EXPECT_EQ(std::memcmp(file.find("v").data, &b, 4), 0);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
  // A failed write keeps the old file.
  EXPECT_THROW(write_safetensors(path("w.safetensors"), {{"v", DType::kFloat32, {1}, nullptr}}),
               Error);
  EXPECT_EQ(std::memcmp(SafetensorsFile(path("w.safetensors")).find("v").data, &b, 4), 0);
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A rename replaces whatever is at the target: a device node, FIFO or folder given as the output
// must be refused naming it and left as it was (once, /dev/full became a 17 MB file).
TEST_F(ModelSafetensors, WriteRefusesToReplaceWhatIsNotARegularFile) {
  float v = 1.0f;
  const std::string fifo = path("fifo"), folder = path("folder"), link = path("link"),
                    node = path("null-node");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_directories(folder);
  fs::create_symlink(fifo, link);
  // A private character node like /dev/null (1, 3) where the test may make one (root).
  const bool have_node = ::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, "(a FIFO)"}, {folder, "(a folder)"}, {link, "(a FIFO)"}};
  if (have_node) cases.push_back({node, "(a device)"});
  for (const auto& [target, kind] : cases) {
    expect_error(
        [&] {
          write_safetensors(target, {{"v", DType::kFloat32, {1}, &v}});
        },
        "output " + target + " exists and is not a regular file " + kind);
  }
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  if (have_node) {
    EXPECT_TRUE(fs::is_character_file(fs::symlink_status(node)));
  }
  // No temporary left behind, and a dangling symlink is simply replaced.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  fs::create_symlink(path("nowhere"), path("dangling"));
  write_safetensors(path("dangling"), {{"v", DType::kFloat32, {1}, &v}});
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path("dangling"))));
}

TEST_F(ModelSafetensors, CorruptFilesAreRejectedNamingFileAndTensor) {
  float v[2] = {1, 2};
  write_safetensors(path("ok.safetensors"), {{"w", DType::kFloat32, {2}, v}});
  std::vector<uint8_t> good = bytes(path("ok.safetensors"));

  write_bytes(path("short.safetensors"), {1, 2, 3});
  expect_error([&] { SafetensorsFile f(path("short.safetensors")); }, "short.safetensors");

  std::vector<uint8_t> truncated(good.begin(), good.end() - 1);  // 7 data bytes for 8 needed
  write_bytes(path("trunc.safetensors"), truncated);
  expect_error([&] { SafetensorsFile f(path("trunc.safetensors")); }, "tensor 'w'");

  std::vector<uint8_t> huge = good;
  huge[7] = 0x7f;  // header length far beyond the file
  write_bytes(path("huge.safetensors"), huge);
  expect_error([&] { SafetensorsFile f(path("huge.safetensors")); }, "header length");

  expect_error([&] { SafetensorsFile f(path("absent.safetensors")); }, "absent.safetensors");
  // A folder opens like a file and claims 2^63 - 1 bytes: once "out of memory".
  fs::create_directories(path("folder.safetensors"));
  expect_error([&] { SafetensorsFile f(path("folder.safetensors")); },
               "folder.safetensors is not a regular file");
  expect_error([&] { SafetensorsFile::header_only(path("folder.safetensors")); },
               "folder.safetensors failed");
  expect_error([&] { SafetensorsFile(path("ok.safetensors")).find("nope"); }, "nope");
  expect_error(
      [&] {
        write_safetensors(path("dup.safetensors"),
                          {{"w", DType::kFloat32, {1}, v}, {"w", DType::kFloat32, {1}, v}});
      },
      "twice");
}

TEST_F(ModelSafetensors, WrappedSizesAndOverlappingTensorsAreRefused) {
  // Found by the hardening issue: element counts could wrap, and two tensors could share
  // bytes.
  const std::string wrap =
      raw("wrap.safetensors",
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})", 0);
  expect_error([&] { SafetensorsFile f(wrap); }, "too many elements");
  const std::string overlap = raw("overlap.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                  12);
  expect_error([&] { SafetensorsFile f(overlap); }, "overlap");
  expect_error([&] { SafetensorsFile::header_only(overlap); }, "overlap");
}

TEST_F(ModelSafetensors, HolesAndTrailingBytesAreRefused) {
  // The format has tensors cover the data section exactly; bytes no tensor owns were accepted.
  const std::string a = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(SafetensorsFile(raw("exact.safetensors", a, 8)).tensors().size(), 1u);
  const std::string trailing = raw("trailing.safetensors", a, 9);
  expect_error([&] { SafetensorsFile f(trailing); }, "1 bytes after the last tensor");
  expect_error([&] { SafetensorsFile::header_only(trailing); }, "trailing.safetensors");
  const std::string hole = raw("hole.safetensors",
                               R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                               20);
  expect_error([&] { SafetensorsFile f(hole); }, "4 bytes of the data section before tensor 'b'");
  const std::string lead =
      raw("lead.safetensors", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
  expect_error([&] { SafetensorsFile f(lead); }, "before tensor 'a'");
}

TEST_F(ModelSafetensors, EmptyTensorsOverlapNothingAndHeaderErrorsKeepTheReason) {
  // An empty tensor at a real one's offset shares no bytes; it was refused as an overlap when
  // the sort (by offset only) put it second.
  for (const char* zero : {"a", "z"}) {
    const std::string header = std::string(R"({")") + zero +
                               R"(":{"dtype":"F16","shape":[0],"data_offsets":[8,8]},)"
                               R"("m":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("n":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
    const SafetensorsFile file(raw("zero.safetensors", header, 16));
    ASSERT_EQ(file.tensors().size(), 3u) << zero;
    EXPECT_EQ(file.get(zero)->bytes, 0u);
  }
  // A header that is not JSON: the parser's reason and position (it said "header is not a JSON
  // object").
  const std::string cut = raw("cut.safetensors", R"({"w":{"dtype":)", 0);
  expect_error([&] { SafetensorsFile f(cut); }, "cut.safetensors: header: not valid JSON: ");
  expect_error([&] { SafetensorsFile f(cut); }, "line 1, column 15");
}

ParamLayout small_layout() {
  ParamLayout l;
  l.add("w", {2, 3}, true);
  l.add("b", {3}, false);
  return l;
}

TEST_F(ModelSafetensors, LayoutLoadConvertsDtypeAndChecksNames) {
  ParamLayout l = small_layout();
  std::vector<float> src(l.total(), 0.0f);
  for (const ParamInfo& p : l.params())
    for (size_t i = 0; i < p.numel; ++i) src[p.offset + i] = 0.1f * float(i + 1) + p.offset;
  save_layout(path("l.safetensors"), l, src.data(), DType::kFloat32);

  std::vector<uint16_t> bf(l.total(), 0);
  LoadReport r = load_layout(path("l.safetensors"), l, bf.data(), DType::kBFloat16);
  EXPECT_EQ(r.loaded.size(), 2u);
  for (const ParamInfo& p : l.params())
    for (size_t i = 0; i < p.numel; ++i)
      EXPECT_EQ(bf[p.offset + i], float_to_bfloat16(src[p.offset + i]));

  ParamLayout bigger = small_layout();
  bigger.add("extra", {4}, true);
  std::vector<float> dst(bigger.total(), -1.0f);
  expect_error([&] { load_layout(path("l.safetensors"), bigger, dst.data(), DType::kFloat32); },
               "missing tensors: extra");
  r = load_layout(path("l.safetensors"), bigger, dst.data(), DType::kFloat32, /*strict=*/false);
  EXPECT_EQ(r.missing, std::vector<std::string>{"extra"});
  EXPECT_EQ(dst[bigger.find("extra").offset], -1.0f) << "missing tensors stay untouched";

  // A non-strict load that matches no tensor (names under another prefix) left every weight
  // at its initialisation, exit 0.
  ParamLayout renamed;
  renamed.add("model.w", {2, 3}, true);
  renamed.add("model.b", {3}, false);
  expect_error(
      [&] {
        load_layout(path("l.safetensors"), renamed, dst.data(), DType::kFloat32, /*strict=*/false);
      },
      "l.safetensors: none of its 2 tensors is one of the model's 2");

  ParamLayout fewer;
  fewer.add("w", {2, 3}, true);
  expect_error([&] { load_layout(path("l.safetensors"), fewer, dst.data(), DType::kFloat32); },
               "unexpected tensors: b");

  ParamLayout reshaped;
  reshaped.add("w", {3, 2}, true);
  reshaped.add("b", {3}, false);
  expect_error([&] { load_layout(path("l.safetensors"), reshaped, dst.data(), DType::kFloat32); },
               "'w' has shape [2, 3], the model expects [3, 2]");

  // Values that are not finite (a diverged run's weights), or not in the model's dtype (1e6
  // is past float16's range), are refused naming the tensor: they trained on with loss NaN.
  src[l.find("b").offset + 1] = NAN;
  save_layout(path("nan.safetensors"), l, src.data(), DType::kFloat32);
  expect_error([&] { load_layout(path("nan.safetensors"), l, dst.data(), DType::kFloat32); },
               "tensor 'b' holds 1 of 3 values that are inf or NaN as float32");
  src[l.find("b").offset + 1] = 1e6f;
  save_layout(path("big.safetensors"), l, src.data(), DType::kFloat32);
  std::vector<uint16_t> half(l.total(), 0);
  expect_error([&] { load_layout(path("big.safetensors"), l, half.data(), DType::kFloat16); },
               "tensor 'b' holds 1 of 3 values that are inf or NaN as float16");
}

TEST(ModelParamLayout, PackedTensorsAreAdjacentOthersAligned) {
  ParamLayout l;
  l.add("a", {3}, true);
  size_t q = l.add("q", {5, 5}, true);
  size_t k = l.add_packed("k", {5, 5}, true);
  size_t b = l.add("bias", {2}, false);
  EXPECT_EQ(q % ParamLayout::kAlign, 0u);
  EXPECT_EQ(k, q + 25);
  EXPECT_EQ(b % ParamLayout::kAlign, 0u);
  EXPECT_EQ(l.num_params(), 3u + 25 + 25 + 2);
  EXPECT_THROW(l.add("a", {1}, true), Error);
}

}  // namespace
}  // namespace kolo::trainer
