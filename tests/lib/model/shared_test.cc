// model::Shared: copies share one value until one of them is changed; the default holds T{}.

#include "model/shared.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "model/policy.h"

namespace tidegate::model {
namespace {

struct Value {
  std::string text;
  int number = 7;
  bool operator==(const Value&) const = default;
};

TEST(Shared, DefaultHoldsTheDefaultValueAndIsDefault) {
  Shared<Value> s;
  EXPECT_EQ(s->number, 7);
  EXPECT_EQ(*s, Value{});
  EXPECT_TRUE(s.is_default());
  Shared<Value> t;
  EXPECT_TRUE(s.shares_with(t));  // neither has an object of its own
  EXPECT_EQ(s, t);
}

TEST(Shared, AValueEqualToTheDefaultIsDefaultAndEqual) {
  Shared<Value> explicit_default(Value{});
  EXPECT_TRUE(explicit_default.is_default());
  EXPECT_EQ(explicit_default, Shared<Value>());
  EXPECT_FALSE(explicit_default.shares_with(Shared<Value>()));
}

TEST(Shared, CopiesShareUntilOneIsChanged) {
  Shared<Value> a(Value{"a", 1});
  Shared<Value> b = a;
  EXPECT_TRUE(a.shares_with(b));
  b.mut().text = "b";
  EXPECT_FALSE(a.shares_with(b));
  EXPECT_EQ(a->text, "a");
  EXPECT_EQ(b->text, "b");
  EXPECT_EQ(b->number, 1);  // the copy started from a's value
  EXPECT_NE(a, b);
}

TEST(Shared, TheOnlyHolderChangesInPlace) {
  Shared<Value> a(Value{"a", 1});
  const Value* before = &*a;
  a.mut().number = 2;
  EXPECT_EQ(&*a, before);
  EXPECT_EQ(a->number, 2);
  {
    Shared<Value> copy = a;
    EXPECT_EQ(&*copy, before);
  }
  a.mut().number = 3;  // the copy is gone: in place again
  EXPECT_EQ(&*a, before);
}

TEST(Shared, ChangingTheDefaultLeavesOtherDefaultsAlone) {
  Shared<Value> a;
  Shared<Value> b;
  a.mut().number = 9;
  EXPECT_EQ(a->number, 9);
  EXPECT_EQ(b->number, 7);
  EXPECT_TRUE(b.is_default());
  EXPECT_FALSE(a.is_default());
  EXPECT_EQ(Shared<Value>()->number, 7);
}

TEST(Shared, EqualityIsByValue) {
  Shared<Value> a(Value{"x", 1});
  Shared<Value> b(Value{"x", 1});
  EXPECT_FALSE(a.shares_with(b));
  EXPECT_EQ(a, b);
  b.mut().number = 2;
  EXPECT_NE(a, b);
}

TEST(Shared, MovedFromHoldsTheDefault) {
  Shared<Value> a(Value{"x", 1});
  Shared<Value> b = std::move(a);
  EXPECT_EQ(b->text, "x");
  EXPECT_TRUE(a.is_default());  // NOLINT(bugprone-use-after-move): specified as the default
}

// Readers on other threads keep their copies' value while the builder changes its own (the
// unit suite also runs under ASan+UBSan).
TEST(Shared, CopiesReadOnOtherThreadsKeepTheirValue) {
  Shared<RoutePolicy> policy;
  policy.mut().rewrite_target = "/old";
  std::vector<std::thread> readers;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([copy = policy, &count = mismatches[t]] {
      for (int i = 0; i < 10'000; ++i) {
        if (copy->rewrite_target != "/old") ++count;
      }
    });
  }
  for (int i = 0; i < 1'000; ++i) policy.mut().rewrite_target = "/new" + std::to_string(i);
  for (auto& r : readers) r.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
  EXPECT_EQ(policy->rewrite_target, "/new999");
}

}  // namespace
}  // namespace tidegate::model
