#pragma once
// The translation kept up to date across store changes, with the endpoint fast path: when only
// EndpointSlices changed since the previous update, the previous result is kept and only the
// upstreams of the Services those slices belong to are recomputed (with the same function the full
// translation uses, translate/endpoints.h). Anything else is a full translation.
//
// Guarantee (tests/controller/incremental_test.cc checks it on randomized changes): the Config is
// equal to what translate(store) gives, and the diagnostics are the same set (their order may
// differ: a full translation lists endpoint warnings in upstream order, the fast path appends).

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"
#include "translate/translate.h"

namespace tidegate::controller::translate {

enum class UpdatePath {
  kNone,       // nothing changed: the previous result stands
  kEndpoints,  // the fast path
  kFull,       // a full translation
};
const char* to_string(UpdatePath p);

class IncrementalTranslator {
 public:
  explicit IncrementalTranslator(TranslateOptions options = {}) : options_(std::move(options)) {}

  // `changes` is what changed in `store` since the previous update (store::Store::take_changes);
  // the first update is always a full translation.
  const TranslateResult& update(const store::Store& store, const store::Changes& changes);

  UpdatePath last_path() const { return last_path_; }
  // Upstreams recomputed by the last fast-path update.
  size_t last_upstreams_updated() const { return last_upstreams_updated_; }
  // Names of the upstreams whose endpoints the last update changed (empty after kNone); the rest
  // of the Config is as the update before left it. Meaningless after kFull.
  const std::vector<std::string>& last_changed_upstreams() const { return last_changed_; }
  // The Config of the last update, shared: every full translation makes a new one, and only the
  // fast path changes one afterwards, in place and only its upstreams. So its other parts stay
  // as they are for as long as anyone holds it (the pusher keeps them as the data plane's
  // acknowledged configuration instead of a copy). Null before the first update.
  std::shared_ptr<const model::Config> shared_config() const {
    return result_ ? std::shared_ptr<const model::Config>(result_, &result_->config) : nullptr;
  }

 private:
  void update_endpoints(const store::Store& store, const store::Changes& changes);

  TranslateOptions options_;
  std::shared_ptr<TranslateResult> result_;
  UpdatePath last_path_ = UpdatePath::kNone;
  size_t last_upstreams_updated_ = 0;
  std::vector<std::string> last_changed_;
};

}  // namespace tidegate::controller::translate
