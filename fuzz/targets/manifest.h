#pragma once
// Fuzz target: manifest text (YAML or JSON, one or more documents) through the controller's whole
// pipeline: load_manifest_text -> build_store -> translate -> the wire -> the data plane.
//
// Invariants:
//   - nothing throws, whatever the text;
//   - the translated Config passes model::validate (translate.h promises it);
//   - translation is deterministic and does not depend on the order the objects were loaded in;
//   - the Config survives the control protocol (encode, decode) unchanged;
//   - the data plane accepts it: its certificate check passes and runtime::build_snapshot
//     succeeds (so one bad object can never block the configuration of a whole cluster with a
//     NACK). These are the checks runtime::Publisher makes, without its logging.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common.h"
#include "model/model.h"
#include "protocol/protocol.h"
#include "runtime/snapshot.h"
#include "source/manifest_loader.h"
#include "store/store.h"
#include "tls/tls_context.h"
#include "translate/translate.h"

namespace tidegate::fuzz {

inline std::string run_manifest(const uint8_t* data, size_t size) {
  using namespace tidegate::controller;
  const std::string_view text = as_text(data, size);

  source::LoadResult loaded = source::load_manifest_text(text, "fuzz.yaml");
  for (const auto& e : loaded.errors) {
    TIDEGATE_FUZZ_CHECK(!e.message.empty(), "a load error without a message");
  }
  const translate::TranslateResult got = translate::translate(store::build_store(loaded));

  const std::vector<std::string> problems = model::validate(got.config);
  TIDEGATE_FUZZ_CHECK(problems.empty(), "translated config is invalid: " << problems.front());

  const translate::TranslateResult again = translate::translate(store::build_store(loaded));
  TIDEGATE_FUZZ_CHECK(again.config == got.config, "translation is not deterministic");
  TIDEGATE_FUZZ_CHECK(again.diagnostics == got.diagnostics, "diagnostics are not deterministic");

  source::LoadResult reversed = loaded;
  std::reverse(reversed.objects.begin(), reversed.objects.end());
  const translate::TranslateResult flipped = translate::translate(store::build_store(reversed));
  TIDEGATE_FUZZ_CHECK(flipped.config == got.config, "translation depends on the object order");

  const std::string frame = protocol::encode_json(protocol::Snapshot{1, got.config});
  protocol::DecodeResult decoded = protocol::decode_json(frame);
  TIDEGATE_FUZZ_CHECK(decoded.message.has_value(),
                      "translated config does not decode: " << decoded.error);
  const auto* snap = std::get_if<protocol::Snapshot>(&*decoded.message);
  TIDEGATE_FUZZ_CHECK(snap != nullptr, "snapshot decoded as another message");
  TIDEGATE_FUZZ_CHECK(snap->config == got.config, "config changed on the wire");

  for (const auto& [name, cert] : got.config.certificates) {
    auto check = dataplane::tls::check_certificate(cert.cert_pem, cert.key_pem);
    TIDEGATE_FUZZ_CHECK(check.error.empty(),
                        "the data plane would refuse certificate " << name << ": " << check.error);
  }
  std::string error;
  auto snapshot = dataplane::runtime::build_snapshot(1, got.config, 1, &error);
  TIDEGATE_FUZZ_CHECK(snapshot != nullptr, "the data plane would refuse it: " << error);
  return {};
}

}  // namespace tidegate::fuzz
