// The graph IR: entry numbering, validation errors, variable classification, the dump.
#include <gtest/gtest.h>

#include "base/error.h"
#include "graph/graph.h"

namespace weft::graph {
namespace {

Node variable(std::string name) {
  Node n;
  n.name = std::move(name);
  return n;
}

Node op_node(std::string op, std::string name, std::vector<NodeEntry> inputs, AttrMap attrs = {}) {
  Node n;
  n.op = &get_op(op);
  n.name = std::move(name);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  return n;
}

Graph conv_bn_graph() {
  Graph g;
  g.add_node(variable("data"));
  g.add_node(variable("w"));
  g.add_node(op_node("Convolution", "conv", {{0, 0}, {1, 0}},
                     {{"kernel", "(3,3)"}, {"num_filter", "8"}, {"no_bias", "True"}}));
  g.add_node(variable("gamma"));
  g.add_node(variable("beta"));
  g.add_node(variable("mean"));
  g.add_node(variable("var"));
  g.add_node(op_node("BatchNorm", "bn", {{2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}}));
  g.add_node(op_node("Activation", "relu", {{7, 0}}, {{"act_type", "relu"}}));
  g.heads = {{8, 0}};
  g.reindex();
  return g;
}

TEST(GraphIR, EntryNumberingCountsHiddenOutputs) {
  Graph g = conv_bn_graph();
  // 6 variables, conv 1, BatchNorm 3 (out, mean, var), relu 1.
  EXPECT_EQ(g.num_entries(), 6u + 1u + 3u + 1u);
  EXPECT_EQ(g.entry_id(7, 0), 7u);
  EXPECT_EQ(g.entry_id(8, 0), 10u);
  EXPECT_EQ(g.entry_of(9).node, 7u);
  EXPECT_EQ(g.entry_of(9).index, 2u);
  EXPECT_EQ(g.entry_of(10).node, 8u);
}

TEST(GraphIR, ArgumentsAndAuxStates) {
  Graph g = conv_bn_graph();
  EXPECT_EQ(g.list_arguments(), (std::vector<std::string>{"data", "w", "gamma", "beta"}));
  EXPECT_EQ(g.list_auxiliary_states(), (std::vector<std::string>{"mean", "var"}));
  EXPECT_EQ(g.list_outputs(), (std::vector<std::string>{"relu_output"}));
}

TEST(GraphIR, ValidationNamesTheNode) {
  Graph g = conv_bn_graph();
  g.nodes[8].inputs[0] = {7, 5};
  try {
    g.reindex();
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("node 8 ('relu')"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 outputs"), std::string::npos) << e.what();
  }
  Graph cyc = conv_bn_graph();
  cyc.nodes[2].inputs[0] = {8, 0};
  EXPECT_THROW(cyc.reindex(), ValueError);
}

TEST(GraphIR, DumpListsNodesAndAttributes) {
  Graph g = conv_bn_graph();
  const std::string text = dump(g);
  EXPECT_NE(text.find("#2 conv = Convolution(#0, #1)"), std::string::npos) << text;
  EXPECT_NE(text.find("num_filter=8"), std::string::npos) << text;
  EXPECT_NE(text.find("heads: #8.0"), std::string::npos) << text;
}

}  // namespace
}  // namespace weft::graph
