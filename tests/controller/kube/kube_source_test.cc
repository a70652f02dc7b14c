// KubeSource's first sync: the signals the controller's start uses to translate the Ingresses
// while the EndpointSlices are still being listed (controller/main.cc), synced_except() and
// wait_for_list(), against reflectors whose EndpointSlice list is held back; and a first list
// stored page by page.

#include "kube/kube_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "scripted_stream.h"

namespace tidegate::controller::kube {
namespace {

using namespace std::chrono_literals;
using objects::Kind;

// Answers every list with one empty page, except the EndpointSlices' list, which waits until
// release(); watches block until cancelled.
class HeldSlicesClient : public ApiClient {
 public:
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

  Response get_list(const std::string& path, bool, size_t) override { return get(path); }
  Response get(const std::string& path) override {
    if (path.find("endpointslices") != std::string::npos) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return released_; });
    }
    return Response{200, R"({"metadata":{"resourceVersion":"7"},"items":[]})", ""};
  }

  std::unique_ptr<LineStream> stream(const std::string&, Response*) override {
    return std::make_unique<ScriptedStream>(std::vector<std::string>{}, true);
  }
  Response send(const std::string&, const std::string&, const std::string&,
                const std::string&) override {
    return Response{405, "", ""};
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

TEST(KubeSource, SaysWhenOnlyTheEndpointSlicesAreLeftAndWakesOnEachList) {
  auto client = std::make_unique<HeldSlicesClient>();
  HeldSlicesClient* held = client.get();
  KubeSource source(std::move(client), store::ClassOptions{}, KubeSourceOptions{}, [](Kind) {});
  // However the test ends, the held list returns before the source stops (which joins it).
  struct ReleaseAtEnd {
    HeldSlicesClient* client;
    ~ReleaseAtEnd() { client->release(); }
  } release_at_end{held};
  EXPECT_FALSE(source.synced_except(Kind::kEndpointSlice));
  source.start();
  // Every other kind's list is handed over; the slices' is not.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  uint64_t seen = 0;
  while (!source.synced_except(Kind::kEndpointSlice) &&
         std::chrono::steady_clock::now() < deadline) {
    seen = source.lists_handed_over();
    source.wait_for_list(seen, 100ms);
  }
  // A reflector counts as synced just before it reports its list: wait for the 13 reports.
  while (source.lists_handed_over() < 13 && std::chrono::steady_clock::now() < deadline) {
    source.wait_for_list(source.lists_handed_over(), 100ms);
  }
  ASSERT_TRUE(source.synced_except(Kind::kEndpointSlice));
  EXPECT_FALSE(source.synced());
  EXPECT_FALSE(source.synced_except(Kind::kIngress));
  // 13 kinds besides the slices (the Gateway API's included).
  seen = source.lists_handed_over();
  EXPECT_EQ(seen, 13u);
  // Nothing more comes: the wait ends at its timeout.
  auto waited = std::chrono::steady_clock::now();
  source.wait_for_list(seen, 50ms);
  EXPECT_GE(std::chrono::steady_clock::now() - waited, 50ms);
  EXPECT_EQ(source.lists_handed_over(), seen);
  // The slices' list wakes a waiter at once, long before its timeout.
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    held->release();
  });
  waited = std::chrono::steady_clock::now();
  source.wait_for_list(seen, 30s);
  EXPECT_LT(std::chrono::steady_clock::now() - waited, 10s);
  releaser.join();
  EXPECT_EQ(source.lists_handed_over(), seen + 1);
  EXPECT_TRUE(source.synced());
  source.stop();
}

// Answers the Ingresses' list in two pages and every other list empty; watches block.
class TwoPageIngressClient : public HeldSlicesClient {
 public:
  std::atomic<int> ingress_pages{0};
  // Set before the lists start: whether the first page's Ingresses are in the store. The second
  // page is answered once they are (or after 5 s); first_page_stored says which.
  std::function<bool()> first_page_in_store;
  std::atomic<bool> first_page_stored{false};
  Response get(const std::string& path) override {
    if (path.find("/ingresses") == std::string::npos) {
      return Response{200, R"({"metadata":{"resourceVersion":"7"},"items":[]})", ""};
    }
    ++ingress_pages;
    auto item = [](const std::string& name) {
      return R"({"metadata":{"name":")" + name +
             R"(","namespace":"default","resourceVersion":"5"},"spec":{"ingressClassName":"tidegate"}})";
    };
    if (path.find("continue=") == std::string::npos) {
      return Response{200,
                      R"({"metadata":{"resourceVersion":"7","continue":"tok"},"items":[)" +
                          item("a") + "," + item("b") + "]}",
                      ""};
    }
    // Asked for before the first page is decoded (the reflector's prefetch): the first page is
    // stored while this one is on its way.
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!first_page_in_store() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    first_page_stored = first_page_in_store();
    return Response{200, R"({"metadata":{"resourceVersion":"7"},"items":[)" + item("c") + "]}", ""};
  }
};

// The first Ingress list goes into the store page by page: all of it is there once the kind is
// synced, and the change is announced once, for the whole list.
TEST(KubeSource, StoresAFirstListPageByPageAndNotifiesOnce) {
  auto client = std::make_unique<TwoPageIngressClient>();
  TwoPageIngressClient* fake = client.get();
  std::atomic<int> ingress_notes{0};
  KubeSource source(std::move(client), store::ClassOptions{}, KubeSourceOptions{},
                    [&](Kind kind) { ingress_notes += kind == Kind::kIngress ? 1 : 0; });
  EXPECT_TRUE(source.takes_pages(Kind::kIngress));
  EXPECT_TRUE(source.takes_pages(Kind::kEndpointSlice));
  EXPECT_FALSE(source.takes_pages(Kind::kSecret));  // also written by fetches by name
  fake->first_page_in_store = [&source] {
    return source.with_store([](const store::Store& s) { return s.ingresses().size() == 2; });
  };
  source.start();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!source.synced() && std::chrono::steady_clock::now() < deadline) {
    source.wait_for_list(source.lists_handed_over(), 100ms);
  }
  ASSERT_TRUE(source.synced());
  source.stop();
  EXPECT_EQ(fake->ingress_pages.load(), 2);
  EXPECT_TRUE(fake->first_page_stored.load());
  EXPECT_EQ(source.with_store([](const store::Store& s) {
    std::string names;
    for (const auto& [key, ingress] : s.ingresses()) names += key + " ";
    return names;
  }),
            "default/a default/b default/c ");
  EXPECT_EQ(ingress_notes.load(), 1);
}

}  // namespace
}  // namespace tidegate::controller::kube
