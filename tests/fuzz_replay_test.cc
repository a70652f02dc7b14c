// Replays every seed corpus file under fuzz/corpus/ through every fuzz target, plus a few cheap
// deterministic mutations of each file through its own target, so that the invariants the fuzz
// targets check hold in the normal test run (Envoy's habit). A real fuzzing session uses the same
// target functions through fuzz/*_fuzz.cc; see fuzz/README.md.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "../fuzz/targets/annotations.h"
#include "../fuzz/targets/http1_message.h"
#include "../fuzz/targets/http2_downstream.h"
#include "../fuzz/targets/http_cache.h"
#include "../fuzz/targets/http_target.h"
#include "../fuzz/targets/kube_protobuf.h"
#include "../fuzz/targets/manifest.h"
#include "../fuzz/targets/path_normalize.h"
#include "../fuzz/targets/protocol_decode.h"
#include "../fuzz/targets/substitution.h"

namespace tidegate::fuzz {
namespace {

namespace fs = std::filesystem;

using TargetFn = std::string (*)(const uint8_t*, size_t);

struct Target {
  std::string name;  // also the corpus directory's name
  TargetFn run;
};

const std::vector<Target>& targets() {
  static const std::vector<Target> kTargets = {
      // clang-format off
      {"protocol_decode", &run_protocol_decode},
      {"manifest", &run_manifest},
      {"http_target", &run_http_target},
      {"substitution", &run_substitution},
      {"path_normalize", &run_path_normalize},
      {"http1_request", &run_http1_request},
      {"http1_response", &run_http1_response},
      {"annotations", &run_annotations},
      {"http2_downstream", [](const uint8_t* d, size_t n) { return run_http2_downstream(d, n); }},
      {"http_cache", &run_http_cache},
      {"kube_protobuf", &run_kube_protobuf},
      // clang-format on
  };
  return kTargets;
}

const fs::path kCorpusRoot = fs::path(TIDEGATE_SOURCE_DIR) / "fuzz" / "corpus";

std::vector<fs::path> corpus_files(const std::string& target) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kCorpusRoot / target, ec)) {
    if (entry.is_regular_file()) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs one input, turning an escaping exception into a failure description.
std::string run(const Target& t, const std::string& input) {
  try {
    return t.run(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  } catch (const std::exception& e) {
    return std::string("exception escaped: ") + e.what();
  } catch (...) {
    return "non-standard exception escaped";
  }
}

// A few deterministic variants of `input`: prefixes, and single bytes replaced by bytes that
// matter to the formats (quotes, brackets, separators, NUL, 0xff).
std::vector<std::string> mutations(const std::string& input) {
  std::vector<std::string> out;
  const size_t n = input.size();
  for (size_t k = 1; k <= 8 && n > 0; ++k) out.push_back(input.substr(0, n * k / 9));
  static constexpr char kBytes[] = {'"', '{', ']', ':', '\n', '/', '?', '\0', '\xff', '-', '*'};
  for (size_t k = 0; k < 16 && n > 0; ++k) {
    std::string m = input;
    m[(k * 7919) % n] = kBytes[k % sizeof kBytes];
    out.push_back(std::move(m));
  }
  return out;
}

TEST(FuzzReplayTest, EveryTargetHasASeedCorpus) {
  for (const auto& t : targets()) {
    const auto files = corpus_files(t.name);
    EXPECT_GE(files.size(), 10u) << kCorpusRoot / t.name;
    EXPECT_LE(files.size(), 30u) << kCorpusRoot / t.name;
  }
}

TEST(FuzzReplayTest, EveryCorpusFileThroughEveryTarget) {
  size_t runs = 0;
  for (const auto& corpus : targets()) {
    for (const auto& file : corpus_files(corpus.name)) {
      const std::string input = read_file(file);
      for (const auto& t : targets()) {
        EXPECT_EQ(run(t, input), "") << t.name << " on " << file;
        ++runs;
      }
    }
  }
  EXPECT_GE(runs, 90u);  // at least 3 targets x 30 files: the corpora were found
}

TEST(FuzzReplayTest, MutatedCorpusFilesThroughTheirOwnTarget) {
  for (const auto& t : targets()) {
    for (const auto& file : corpus_files(t.name)) {
      const std::string input = read_file(file);
      const auto variants = mutations(input);
      for (size_t i = 0; i < variants.size(); ++i) {
        EXPECT_EQ(run(t, variants[i]), "") << t.name << " on " << file << ", mutation " << i;
      }
    }
  }
}

// The checks are not vacuous: inputs known to exercise each target's main path pass through it
// and produce what they should.
TEST(FuzzReplayTest, TargetsSeeWhatTheyShould) {
  const std::string frames =
      read_file(kCorpusRoot / "protocol_decode" / "frames_hello_snapshot.bin");
  protocol::FrameReader reader;
  reader.append(frames.data(), frames.size());
  auto first = reader.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(protocol::decode_json(*first).message.has_value()) << *first;

  const std::string demo = read_file(kCorpusRoot / "manifest" / "demo_coffee.yaml");
  auto loaded = controller::source::load_manifest_text(demo, "demo_coffee.yaml");
  auto result = controller::translate::translate(controller::store::build_store(loaded));
  EXPECT_TRUE(result.config.virtual_hosts.contains("coffee.example.com"));

  const auto& fx = detail::http_target_fixture();
  ASSERT_NE(fx.router, nullptr);
  EXPECT_EQ(detail::upstream_of(fx.router->match("foo.com", "/login")), "exact-login");
  EXPECT_EQ(detail::upstream_of(fx.router->match("x.foo.com", "/w/1")), "wildcard-w");
  EXPECT_EQ(detail::upstream_of(fx.router->match("nowhere.org", "/any")), "any");
  EXPECT_EQ(detail::upstream_of(fx.router->match("nowhere.org", "/else")), "default");

  // http1_request: seeds reach the accepted path with edits, and the refusals.
  auto verdict_of = [](const std::string& name) {
    const std::string bytes = read_file(kCorpusRoot / "http1_request" / name);
    detail::HeadParser<true> parser;
    size_t used = 0;
    EXPECT_TRUE(detail::parse_head(parser, bytes, &used)) << name;
    return dataplane::server::check_request(parser.get(), dataplane::server::RequestRules{});
  };
  const auto absolute = verdict_of("absolute_form.http");
  EXPECT_EQ(absolute.status, 0u);
  EXPECT_TRUE(absolute.replace_host && absolute.replace_target);
  EXPECT_EQ(absolute.host, "a.example");
  EXPECT_EQ(absolute.target, "/y?z");
  EXPECT_TRUE(verdict_of("chunked_capital.http").canonical_chunked);
  EXPECT_TRUE(verdict_of("websocket.http").websocket_upgrade);
  EXPECT_FALSE(verdict_of("h2c_upgrade.http").websocket_upgrade);
  EXPECT_EQ(verdict_of("te_xchunked.http").status, 400u);
  EXPECT_EQ(verdict_of("two_hosts.http").status, 400u);

  // http2_downstream: every stream of the seeds gets its answer (503: the worker has no
  // configuration), the proxy's own refusals included.
  auto h2_statuses = [](const std::string& name) {
    const std::string bytes = read_file(kCorpusRoot / "http2_downstream" / name);
    http2_detail::Observed seen;
    EXPECT_EQ(
        run_http2_downstream(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &seen),
        "")
        << name;
    return seen.final_status;
  };
  EXPECT_EQ(h2_statuses("get.bin"), (std::map<int32_t, std::string>{{1, "503"}}));
  EXPECT_EQ(h2_statuses("three_gets.bin"),
            (std::map<int32_t, std::string>{{1, "503"}, {3, "503"}, {5, "503"}}));
  EXPECT_EQ(h2_statuses("post_body.bin"), (std::map<int32_t, std::string>{{1, "503"}}));
  EXPECT_EQ(h2_statuses("host_mismatch.bin"), (std::map<int32_t, std::string>{{1, "400"}}));
  EXPECT_EQ(h2_statuses("dot_segments.bin").at(1), "400");
  EXPECT_EQ(h2_statuses("hpack_bomb.bin"),
            (std::map<int32_t, std::string>{{1, "503"}, {3, "431"}}));

  // http1_response: a relayed head and a refused one.
  auto response_verdict = [](const std::string& name) {
    const std::string bytes = read_file(kCorpusRoot / "http1_response" / name);
    detail::HeadParser<false> parser;
    size_t used = 0;
    EXPECT_TRUE(detail::parse_head(parser, bytes, &used)) << name;
    return dataplane::server::check_response(parser.get()).status;
  };
  EXPECT_EQ(response_verdict("ok_chunked.http"), 0u);
  EXPECT_EQ(response_verdict("te_gzip.http"), 502u);

  // annotations: a seed gives a policy other than the default, and an invalid value a report.
  const std::string balance = read_file(kCorpusRoot / "annotations" / "affinity.txt");
  auto m = detail::annotations_from(std::string_view(balance).substr(1));
  auto parsed = controller::translate::parse_annotations(m, {});
  EXPECT_TRUE(parsed.policy.upstream->affinity.has_value());
  const std::string bad = read_file(kCorpusRoot / "annotations" / "bad_timeouts.txt");
  auto bad_parsed = controller::translate::parse_annotations(
      detail::annotations_from(std::string_view(bad).substr(1)), {});
  EXPECT_GE(bad_parsed.diagnostics.size(), 3u);
}

}  // namespace
}  // namespace tidegate::fuzz
