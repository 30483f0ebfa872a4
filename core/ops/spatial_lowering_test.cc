// Layout invariance of the spatial ops: graphs with shift, halo_exchange, conv1d/conv2d and
// pooling, lowered for many meshes and layouts (especially layouts splitting the shifted and
// convolved spatial dims), run on the simulated mesh with the reference and the CPU kernels, equal
// the interpreter within 1e-5. Plus the structure of the lowered programs: halos move by permutes
// of halo-sized slices, never by gathering the spatial dim.
#include <string>
#include <vector>

#include "core/testing/spatial_testing.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {
namespace {

using testing_spatial::CountCollectives;
using testing_spatial::ExpectMatchesInterpreter;
using testing_spatial::GraphFromText;

// x [batch:4, h:8, c:4]: shifts along h (partial and whole blocks, both fills, past the end) and
// along c; xb [batch:4, hb:4, hw:4, c:4]: halo exchanges with the blocks dim hb.
constexpr char kShiftGraph[] = R"pb(
  ops {
    name: "x"
    type: "placeholder"
    shape {
      dims { name: "batch" size: 4 }
      dims { name: "h" size: 8 }
      dims { name: "c" size: 4 }
    }
  }
  ops {
    name: "s1"
    type: "shift"
    inputs: "x"
    dims: "h"
    attrs {
      key: "offset"
      value { i: 3 }
    }
  }
  ops {
    name: "s2"
    type: "shift"
    inputs: "x"
    dims: "h"
    attrs {
      key: "offset"
      value { i: -5 }
    }
    attrs {
      key: "wrap"
      value { b: true }
    }
  }
  ops {
    name: "s3"
    type: "shift"
    inputs: "x"
    dims: "h"
    attrs {
      key: "offset"
      value { i: 4 }
    }
  }
  ops {
    name: "s4"
    type: "shift"
    inputs: "x"
    dims: "h"
    attrs {
      key: "offset"
      value { i: -2 }
    }
  }
  ops {
    name: "s5"
    type: "shift"
    inputs: "x"
    dims: "h"
    attrs {
      key: "offset"
      value { i: 9 }
    }
  }
  ops {
    name: "s6"
    type: "shift"
    inputs: "x"
    dims: "c"
    attrs {
      key: "offset"
      value { i: 1 }
    }
    attrs {
      key: "wrap"
      value { b: true }
    }
  }
  ops {
    name: "s7"
    type: "shift"
    inputs: "x"
    dims: "h"
    attrs {
      key: "offset"
      value { i: 13 }
    }
    attrs {
      key: "wrap"
      value { b: true }
    }
  }
  ops {
    name: "xb"
    type: "placeholder"
    shape {
      dims { name: "batch" size: 4 }
      dims { name: "hb" size: 4 }
      dims { name: "hw" size: 4 }
      dims { name: "c" size: 4 }
    }
  }
  ops {
    name: "e1"
    type: "halo_exchange"
    inputs: "xb"
    dims: "hb"
    dims: "hw"
    attrs {
      key: "halo"
      value { i: 2 }
    }
  }
  ops {
    name: "e2"
    type: "halo_exchange"
    inputs: "xb"
    dims: "hb"
    dims: "hw"
    attrs {
      key: "halo"
      value { i: 1 }
    }
    attrs {
      key: "wrap"
      value { b: true }
    }
    attrs {
      key: "output_dim"
      value { s: "hw1" }
    }
  }
)pb";

// Convolutions and pools: 2-D over x [batch:4, h:8, w:8, cin:4] with a 3x3 and a 2x4 filter (SAME,
// asymmetric padding), VALID, strided; 1-D over t:16 with a width-5 filter; pools that do and do
// not line up with the blocks.
constexpr char kConvGraph[] = R"pb(
  ops {
    name: "x"
    type: "placeholder"
    shape {
      dims { name: "batch" size: 4 }
      dims { name: "h" size: 8 }
      dims { name: "w" size: 8 }
      dims { name: "cin" size: 4 }
    }
  }
  ops {
    name: "f"
    type: "placeholder"
    shape {
      dims { name: "kh" size: 3 }
      dims { name: "kw" size: 3 }
      dims { name: "cin" size: 4 }
      dims { name: "cout" size: 4 }
    }
  }
  ops {
    name: "f2"
    type: "placeholder"
    shape {
      dims { name: "kh2" size: 2 }
      dims { name: "kw2" size: 4 }
      dims { name: "cin" size: 4 }
      dims { name: "cout" size: 4 }
    }
  }
  ops { name: "y" type: "conv2d" inputs: "x" inputs: "f" dims: "h" dims: "w" }
  ops { name: "y2" type: "conv2d" inputs: "x" inputs: "f2" dims: "h" dims: "w" }
  ops {
    name: "yv"
    type: "conv2d"
    inputs: "x"
    inputs: "f"
    dims: "h"
    dims: "w"
    attrs {
      key: "padding"
      value { s: "VALID" }
    }
    attrs {
      key: "output_dims"
      value { strings { values: [ "hv", "wv" ] } }
    }
  }
  ops {
    name: "ys"
    type: "conv2d"
    inputs: "x"
    inputs: "f"
    dims: "h"
    dims: "w"
    attrs {
      key: "strides"
      value { ints { values: [ 2, 2 ] } }
    }
    attrs {
      key: "output_dims"
      value { strings { values: [ "hs", "ws" ] } }
    }
  }
  ops {
    name: "mp"
    type: "max_pool"
    inputs: "x"
    dims: "h"
    dims: "w"
    attrs {
      key: "ksize"
      value { ints { values: [ 2, 2 ] } }
    }
    attrs {
      key: "output_dims"
      value { strings { values: [ "hp", "wp" ] } }
    }
  }
  ops {
    name: "ap"
    type: "avg_pool"
    inputs: "y"
    dims: "h"
    attrs {
      key: "ksize"
      value { ints { values: 4 } }
    }
    attrs {
      key: "output_dims"
      value { strings { values: "hq" } }
    }
  }
  ops {
    name: "x1"
    type: "placeholder"
    shape {
      dims { name: "batch" size: 4 }
      dims { name: "t" size: 16 }
      dims { name: "cin" size: 4 }
    }
  }
  ops {
    name: "f1"
    type: "placeholder"
    shape {
      dims { name: "kt" size: 5 }
      dims { name: "cin" size: 4 }
      dims { name: "cout" size: 4 }
    }
  }
  ops { name: "c1" type: "conv1d" inputs: "x1" inputs: "f1" dims: "t" }
  ops {
    name: "c1v"
    type: "conv1d"
    inputs: "x1"
    inputs: "f1"
    dims: "t"
    attrs {
      key: "padding"
      value { s: "VALID" }
    }
    attrs {
      key: "output_dims"
      value { strings { values: "tv" } }
    }
  }
  ops {
    name: "tp"
    type: "max_pool"
    inputs: "c1"
    dims: "t"
    attrs {
      key: "ksize"
      value { ints { values: 3 } }
    }
    attrs {
      key: "output_dims"
      value { strings { values: "tp" } }
    }
  }
)pb";

struct Case {
  std::string mesh;
  std::string layout;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.mesh << " / " << c.layout; }

const std::vector<Case>& ShiftCases() {
  static const auto* cases = new std::vector<Case>{
      {"p:1", ""},
      {"p:1", "h:p,hb:p"},
      {"p:4", "h:p"},
      {"p:4", "hb:p"},
      {"p:4", "hw:p"},
      {"p:4", "c:p"},
      {"p:4", "h:p,hw:p"},
      {"rows:2,cols:2", "h:rows,c:cols"},
      {"rows:2,cols:2", "batch:rows,h:cols,hb:cols"},
      {"rows:2,cols:2", "hb:rows,hw:cols"},
      {"rows:2,cols:2", "hb:cols,hw1:rows,hw_halo:rows"},
      {"x:2,y:2,z:2", "batch:x,h:y,hb:z"},
      {"x:2,y:2,z:2", "h:z,hb:x,hw:y"},
      {"x:2,y:2,z:2", "hb:y,batch:z,hw1:x"},
  };
  return *cases;
}

const std::vector<Case>& ConvCases() {
  static const auto* cases = new std::vector<Case>{
      {"p:1", ""},
      {"p:1", "h:p,t:p"},
      {"p:4", "h:p"},
      {"p:4", "w:p,t:p"},
      {"p:4", "cin:p"},
      {"p:4", "cout:p,hp:p"},
      {"p:4", "batch:p"},
      {"rows:2,cols:2", "h:rows,w:cols"},
      {"rows:2,cols:2", "batch:rows,cin:cols"},
      {"rows:2,cols:2", "h:rows,cout:cols,t:rows"},
      {"rows:2,cols:2", "w:rows,cin:cols,hv:rows,hq:cols"},
      {"rows:2,cols:2", "hs:rows,ws:cols,tv:cols,kw2:rows"},
      {"x:2,y:2,z:2", "h:x,w:y,cin:z"},
      {"x:2,y:2,z:2", "batch:x,h:y,cout:z,t:y"},
      {"x:2,y:2,z:2", "hp:x,wp:y,cin:z,t:x"},
      {"x:2,y:2,z:2", "h:z,w:x,t:y,hv:y"},
  };
  return *cases;
}

class ShiftLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShiftLayoutTest, ReferenceKernelsMatchInterpreter) {
  ExpectMatchesInterpreter(GraphFromText(kShiftGraph), GetParam().mesh, GetParam().layout,
                           ReferenceKernels(), 1e-5);
}

TEST_P(ShiftLayoutTest, CpuKernelsMatchInterpreter) {
  ExpectMatchesInterpreter(GraphFromText(kShiftGraph), GetParam().mesh, GetParam().layout,
                           CpuKernels(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Meshes, ShiftLayoutTest, ::testing::ValuesIn(ShiftCases()));

class ConvLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConvLayoutTest, ReferenceKernelsMatchInterpreter) {
  ExpectMatchesInterpreter(GraphFromText(kConvGraph), GetParam().mesh, GetParam().layout,
                           ReferenceKernels(), 1e-5);
}

TEST_P(ConvLayoutTest, CpuKernelsMatchInterpreter) {
  ExpectMatchesInterpreter(GraphFromText(kConvGraph), GetParam().mesh, GetParam().layout,
                           CpuKernels(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Meshes, ConvLayoutTest, ::testing::ValuesIn(ConvCases()));

// The sizes along `dim` of the slices every PERMUTE made for `source_op` moves.
std::vector<int64_t> PermutedSizes(const v1::Program& p, const std::string& source_op,
                                   const std::string& dim) {
  std::vector<int64_t> sizes;
  for (const v1::Instruction& inst : p.instructions()) {
    if (!inst.has_collective() || inst.collective().kind() != v1::Collective::PERMUTE ||
        inst.source_op() != source_op) {
      continue;
    }
    for (const v1::Dim& d : inst.slice_shape().dims()) {
      if (d.name() == dim) sizes.push_back(d.size());
    }
  }
  return sizes;
}

TEST(SpatialLoweringTest, ShiftOfAPartialBlockIsTwoPermutesOfItsParts) {
  const v1::Program p =
      ExpectMatchesInterpreter(GraphFromText(kShiftGraph), "p:4", "h:p", ReferenceKernels(), 1e-5);
  // h:8 over 4: blocks of 2. Offset 3 = 1 block + 1: parts of 1 and 1; offset 4 = 2 whole blocks.
  EXPECT_EQ(PermutedSizes(p, "s1", "h"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(PermutedSizes(p, "s3", "h"), (std::vector<int64_t>{2}));
  EXPECT_EQ(CountCollectives(p, v1::Collective::PERMUTE, "s5"), 0);  // past the end: zeros
  EXPECT_EQ(CountCollectives(p, v1::Collective::PERMUTE, "s6"), 0);  // c is whole
  for (const char* op : {"s1", "s2", "s3", "s4", "s7"}) {
    EXPECT_EQ(CountCollectives(p, v1::Collective::ALLGATHER, op), 0) << op;
  }
}

TEST(SpatialLoweringTest, HaloExchangeMovesOnlyTheEdges) {
  const v1::Program p =
      ExpectMatchesInterpreter(GraphFromText(kShiftGraph), "p:4", "hb:p", ReferenceKernels(), 1e-5);
  EXPECT_EQ(PermutedSizes(p, "e1", "hw"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(PermutedSizes(p, "e2", "hw"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(CountCollectives(p, v1::Collective::ALLGATHER), 0);
}

TEST(SpatialLoweringTest, ConvOverSplitSpatialDimsPermutesHalosAndNeverGathers) {
  const v1::Program p = ExpectMatchesInterpreter(GraphFromText(kConvGraph), "rows:2,cols:2",
                                                 "h:rows,w:cols,hs:rows,ws:cols,hp:rows,wp:cols",
                                                 ReferenceKernels(), 1e-5);
  // 3x3 SAME: one position from each side along h (blocks of 4 rows), then along w the extended
  // blocks (4 + 2 rows) trade one column each way.
  EXPECT_EQ(PermutedSizes(p, "y", "h"), (std::vector<int64_t>{1, 1, 6, 6}));
  EXPECT_EQ(PermutedSizes(p, "y", "w"), (std::vector<int64_t>{4, 4, 1, 1}));
  // 2x4 SAME: h pads 0 before / 1 after, w 1 before / 2 after.
  EXPECT_EQ(PermutedSizes(p, "y2", "h"), (std::vector<int64_t>{1, 5, 5}));
  EXPECT_EQ(PermutedSizes(p, "y2", "w"), (std::vector<int64_t>{4, 1, 2}));
  // Stride 2: the output blocks (2 rows) line up with the input blocks (4 rows); one row follows.
  EXPECT_EQ(PermutedSizes(p, "ys", "h"), (std::vector<int64_t>{1, 5}));
  for (const char* op : {"y", "y2", "ys", "mp"}) {
    EXPECT_EQ(CountCollectives(p, v1::Collective::ALLGATHER, op), 0) << op;
  }
  // Aligned pooling is local; VALID gathers (documented fallback).
  EXPECT_EQ(CountCollectives(p, v1::Collective::PERMUTE, "mp"), 0);
  EXPECT_GT(CountCollectives(p, v1::Collective::ALLGATHER, "yv"), 0);
}

TEST(SpatialLoweringTest, SplitInChannelsSumOverTheMesh) {
  const v1::Program p =
      ExpectMatchesInterpreter(GraphFromText(kConvGraph), "p:4", "cin:p", ReferenceKernels(), 1e-5);
  for (const char* op : {"y", "c1"}) {
    EXPECT_EQ(CountCollectives(p, v1::Collective::ALLREDUCE, op) +
                  CountCollectives(p, v1::Collective::REDUCE_SCATTER, op),
              1)
        << op;
    EXPECT_EQ(CountCollectives(p, v1::Collective::PERMUTE, op), 0) << op;
  }
}

TEST(SpatialLoweringTest, MisalignedPoolAndWideHalosGather) {
  // t:16 over 4: blocks of 4; the width-3 pool windows straddle blocks, so t is gathered for tp.
  const v1::Program p =
      ExpectMatchesInterpreter(GraphFromText(kConvGraph), "p:4", "t:p", ReferenceKernels(), 1e-5);
  EXPECT_GT(CountCollectives(p, v1::Collective::ALLGATHER, "tp"), 0);
  // The width-5 SAME conv needs 2 positions from each side: within a block of 4.
  EXPECT_EQ(PermutedSizes(p, "c1", "t"), (std::vector<int64_t>{2, 2}));
}

}  // namespace
}  // namespace meshrt
