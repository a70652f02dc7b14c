#pragma once
// One kind's list-then-watch loop on its own thread (client-go calls this a reflector): list every
// object (in pages), hand the full set to the sink, then watch from the list's resourceVersion,
// handing over each change. A watch that ends is resumed from the last resourceVersion seen
// (events and bookmarks move it); 410 Gone means that version was compacted away, so it relists.
// Errors back off exponentially with jitter. The sink decides what to keep.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/api.h"
#include "kube/client.h"
#include "objects/objects.h"

namespace tidegate::controller::kube {

struct ReflectorOptions {
  // Objects per list page. Each page costs the API server time in proportion to the whole
  // list, not to the page (at 100,000 objects per kind, pages of 500 took it 10.3 s of CPU in
  // all, pages of 5,000 1.4 s: docs/benchmarks.md, "Protobuf lists"), so pages are large; a
  // page still bounds what is decoded at once (client-go's informers list everything at once).
  int list_page_size = 5000;
  // Lists of Ingresses, Services and EndpointSlices in protobuf (kube/proto_reader.h); JSON
  // when false. Watches are JSON either way.
  bool protobuf_lists = true;
  // The server ends each watch after a random time in [watch_timeout, 2 * watch_timeout], so that
  // watches of several kinds (and replicas) do not all restart at once.
  std::chrono::seconds watch_timeout{300};
  std::chrono::milliseconds backoff_min{200};
  std::chrono::milliseconds backoff_max{5'000};
  // For a resource that may not be served at all (a CRD that is not installed): a list answered
  // 404 (not served) or 403 (our role does not grant it) hands the sink an empty set, counts as
  // synced, and is tried again every `absent_recheck`; a watch answered 404 relists. Off for the
  // built-in kinds, whose absence is an error retried with backoff.
  bool optional = false;
  std::chrono::milliseconds absent_recheck{30'000};
};

// Receives a reflector's results, on the reflector's thread. Implementations lock what they share.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // The full set of `kind` after a (re)list: anything stored and not in `objects` is gone.
  virtual void replace(objects::Kind kind, std::vector<objects::Object> objects) = 0;
  virtual void upsert(objects::Object object) = 0;
  virtual void remove(objects::Kind kind, const std::string& namespace_,
                      const std::string& name) = 0;
  // A list of `kind` has been handed over (replace() returned) and the reflector counts as
  // synced; after every list, the first included.
  virtual void listed(objects::Kind /*kind*/) {}
  // Whether the first list of `kind` may be handed over page by page: add_page() with each
  // page's objects, then end_pages() instead of one replace(). Only for a kind the sink holds
  // nothing of until then and that nothing but this reflector writes (nothing is removed at the
  // end). A list that fails after a page was added is listed again with replace().
  virtual bool takes_pages(objects::Kind /*kind*/) const { return false; }
  virtual void add_page(objects::Kind /*kind*/, std::vector<objects::Object> /*objects*/) {}
  virtual void end_pages(objects::Kind /*kind*/) {}
};

class Reflector {
 public:
  Reflector(ApiClient& client, objects::Kind kind, std::string namespace_, ReflectorSink& sink,
            ReflectorOptions options = {});
  ~Reflector();
  void start();
  void stop();                             // any thread; joins
  bool synced() const { return synced_; }  // the first list has been handed over
  objects::Kind kind() const { return kind_; }
  // An optional resource that the last list found not served (or forbidden).
  bool absent() const { return absent_; }
  uint64_t lists() const { return lists_; }
  std::string name() const;  // "Ingress" or "Ingress in NS"

 private:
  enum class ListEnd { kListed, kAbsent, kFailed };
  enum class WatchEnd { kClosed, kGone, kAbsent, kError };
  void run();
  ListEnd list();
  // An optional resource's list or watch was answered `status` (404 or 403): the resource is
  // not there for us. Logs the news once per change, not on every recheck.
  void note_absent(const Response& r);
  WatchEnd watch();
  // Converts one object; logs and returns nullopt when it cannot be read.
  std::optional<objects::Object> convert(const objects::Node& node);
  bool sleep_for(std::chrono::milliseconds d);  // false when stopping

  // A protobuf list page failed to decode: this kind is listed in JSON from then on.
  bool protobuf_failed_ = false;
  // A page of a list was handed over with add_page(): lists go through replace() from then on.
  bool pages_added_ = false;
  ApiClient& client_;
  objects::Kind kind_;
  std::string namespace_;
  ReflectorSink& sink_;
  ReflectorOptions options_;
  Backoff backoff_;
  std::mt19937 rng_;
  std::string resource_version_;
  // The first page of the last list, in bytes: the room reserved for the next list's first
  // page (each later page is expected to be the size of the one before).
  size_t first_page_bytes_ = 0;
  bool failing_ = false;  // the last watch attempt failed: log retries quietly
  std::atomic<bool> synced_{false};
  std::atomic<bool> absent_{false};
  std::atomic<uint64_t> lists_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  LineStream* current_ = nullptr;  // the open watch, so that stop() can cancel it
  std::thread thread_;
};

}  // namespace tidegate::controller::kube
