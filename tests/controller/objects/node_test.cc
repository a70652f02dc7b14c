#include "objects/node.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "kube/json_reader.h"

namespace tidegate::controller::objects {
namespace {

Node json(const std::string& text) {
  std::string error;
  auto read = kube::read_json(text, &error);
  EXPECT_TRUE(read) << error;
  return read ? *read : Node();
}

TEST(Node, MissingThingsAreUndefinedAndAnswerEmpty) {
  const Node n = json(R"({"a":{"b":[1,"x",null]},"s":"text"})");
  EXPECT_FALSE(n["nope"].IsDefined());
  EXPECT_FALSE(n["nope"]["deeper"][3].IsDefined());
  EXPECT_FALSE(static_cast<bool>(n["nope"]));
  EXPECT_EQ(n["nope"].Scalar(), "");
  EXPECT_EQ(n["nope"].size(), 0u);
  EXPECT_FALSE(n["a"]["b"][3].IsDefined());   // past the end
  EXPECT_FALSE(n["a"]["b"][-1].IsDefined());  // negative
  EXPECT_FALSE(n["s"]["x"].IsDefined());      // a key of a scalar
  EXPECT_FALSE(n["a"][0].IsDefined());        // an index of a mapping
  EXPECT_EQ(n["a"].Scalar(), "");             // a mapping has no text
  EXPECT_TRUE(n["a"]["b"][2].IsNull());
  EXPECT_TRUE(n["a"]["b"][2].IsDefined());
  EXPECT_EQ(n["a"]["b"][0].Scalar(), "1");
  EXPECT_EQ(n["a"]["b"].size(), 3u);
  EXPECT_EQ(n.size(), 2u);
}

TEST(Node, IteratesSequencesAndMappingsInOrder) {
  const Node n = json(R"({"z":1,"a":2,"m":[3,4]})");
  std::vector<std::string> keys, values;
  for (const auto& kv : n) {
    keys.push_back(kv.first.Scalar());
    values.push_back(kv.second.Scalar());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2", ""}));
  std::vector<std::string> items;
  for (const auto& item : n["m"]) items.push_back(item.Scalar());
  EXPECT_EQ(items, (std::vector<std::string>{"3", "4"}));
  int none = 0;
  for (const auto& item : n["z"]) none += static_cast<int>(item.size()) + 1;  // a scalar: nothing
  EXPECT_EQ(none, 0);
}

TEST(Node, ARepeatedKeyFindsTheFirstAsYamlCppDoes) {
  const Node from_json = json(R"({"k":"first","k":"second"})");
  EXPECT_EQ(from_json["k"].Scalar(), "first");
  EXPECT_EQ(from_json.size(), 2u);
  const YAML::Node yaml = YAML::Load("k: first\nk: second\n");
  EXPECT_EQ(yaml["k"].Scalar(), "first");
  EXPECT_EQ(Node(yaml)["k"].Scalar(), "first");
}

TEST(Node, CopiesYamlTreesWithTheirTypes) {
  const Node n(YAML::Load("a: ~\nb: \"\"\nc: [1, {d: e}]\nf: {}\ng:\n"));
  EXPECT_TRUE(n.IsMap());
  EXPECT_TRUE(n["a"].IsNull());
  EXPECT_TRUE(n["b"].IsScalar());
  EXPECT_EQ(n["b"].Scalar(), "");
  EXPECT_TRUE(n["c"].IsSequence());
  EXPECT_EQ(n["c"][1]["d"].Scalar(), "e");
  EXPECT_TRUE(n["f"].IsMap());
  EXPECT_EQ(n["f"].size(), 0u);
  EXPECT_TRUE(n["g"].IsNull());
  EXPECT_FALSE(Node(YAML::Node(YAML::NodeType::Undefined)).IsDefined());
}

TEST(Node, AChildKeepsItsDocumentAlive) {
  Node child;
  {
    const Node root = json(R"({"items":[{"metadata":{"name":"kept"}}]})");
    child = root["items"][0];
  }
  EXPECT_EQ(child["metadata"]["name"].Scalar(), "kept");
}

// The arena: many nodes over many blocks, scalars larger than a block and empty ones, each read
// back as written and in order (a node or text overwritten by a later allocation, or a block
// dropped while a node points into it, fails this; ASan reports the latter).
TEST(Node, ALargeDocumentReadsBackAsWritten) {
  std::string text = "{\"items\":[";
  const std::string big(300 * 1024, 'x');  // more than a block: a block of its own
  for (int i = 0; i < 5000; ++i) {
    if (i > 0) text += ",";
    text += "{\"name\":\"item-" + std::to_string(i) + "\",\"n\":" + std::to_string(i) +
            ",\"empty\":\"\",\"flag\":" + (i % 2 ? "true" : "false") + ",\"list\":[" +
            std::to_string(i) + ",\"" + std::to_string(i + 1) + "\"]";
    if (i % 1000 == 7) text += ",\"big\":\"" + big + std::to_string(i) + "\"";
    text += "}";
  }
  text += "]}";
  const Node root = json(text);
  const Node items = root["items"];
  ASSERT_EQ(items.size(), 5000u);
  int i = 0;
  for (const auto& item : items) {
    ASSERT_EQ(item["name"].Scalar(), "item-" + std::to_string(i));
    EXPECT_EQ(item["n"].ScalarView(), std::to_string(i));
    EXPECT_TRUE(item["empty"].IsScalar());
    EXPECT_EQ(item["empty"].Scalar(), "");
    EXPECT_EQ(item["flag"].Scalar(), i % 2 ? "true" : "false");
    EXPECT_EQ(item["list"].size(), 2u);
    EXPECT_EQ(item["list"][1].Scalar(), std::to_string(i + 1));
    if (i % 1000 == 7) {
      EXPECT_EQ(item["big"].Scalar(), big + std::to_string(i));
    } else {
      EXPECT_FALSE(item["big"].IsDefined());
    }
    ++i;
  }
  EXPECT_EQ(i, 5000);
  EXPECT_EQ(items[4999]["name"].Scalar(), "item-4999");
}

// A document reset for the next list page keeps its full-size blocks: a second tree as large as
// the first takes no new memory, and reads back as written, with nothing of the first in it.
TEST(Node, AResetDocumentReusesItsBlocks) {
  auto doc = std::make_shared<Document>();
  auto fill = [&](const std::string& prefix) {
    Document::Data* seq = doc->add(NodeType::kSequence);
    for (int i = 0; i < 20000; ++i) {
      Document::Data* map = doc->add(NodeType::kMap);
      doc->append(map, doc->add_static_scalar("name"), doc->add_scalar(prefix + std::to_string(i)));
      doc->push(seq, map);
    }
    return seq;
  };
  fill("first-");
  const size_t used = doc->capacity();
  ASSERT_GT(used, 4u * 256 * 1024);  // several full-size blocks, and the small first ones
  doc->reset();
  EXPECT_LT(doc->capacity(), used);  // the small blocks are gone, the full-size ones kept
  const Document::Data* seq = fill("other-");
  // The kept blocks, and one more full-size block in place of the small first ones (without the
  // reuse it would be about twice `used`).
  EXPECT_GE(doc->capacity(), used);
  EXPECT_LE(doc->capacity(), used + 256 * 1024);
  const Node root(doc, seq);
  ASSERT_EQ(root.size(), 20000u);
  int i = 0;
  for (const auto& item : root) {
    ASSERT_EQ(item["name"].Scalar(), "other-" + std::to_string(i));
    ++i;
  }
}

}  // namespace
}  // namespace tidegate::controller::objects
