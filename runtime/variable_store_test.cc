// The variable store (variable_store.h): slices move into their buffers and back, a missing one is
// initialised, a failed step keeps the values it loaded, a buffer feeding two variables is copied,
// and Set checks the slice against the variable's layout.
#include "runtime/variable_store.h"

#include <map>
#include <string>
#include <vector>

#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "runtime/test_kernels.h"

namespace meshrt {
namespace {

// Two variables on a mesh of two along `x`: w [n:4] split over x (buffer 0, update in 2) and b
// [n:4] replicated (buffer 1, update in 3). On processor 1.
constexpr char kProgram[] = R"pb(
  mesh { dims { name: "x" size: 2 } }
  num_buffers: 4
  variables {
    name: "w" buffer: 0 update_buffer: 2 dtype: DT_FLOAT32
    shape { dims { name: "n" size: 4 } } layout { mesh_axis: 0 }
    initializer { output: 0 dtype: DT_FLOAT32 source_op: "w_init"
                  slice_shape { dims { name: "n" size: 2 } } local { type: "zeros" } }
  }
  variables {
    name: "b" buffer: 1 update_buffer: 3 dtype: DT_FLOAT32
    shape { dims { name: "n" size: 4 } } layout { mesh_axis: -1 }
    initializer { output: 1 dtype: DT_FLOAT32 source_op: "b_init"
                  slice_shape { dims { name: "n" size: 4 } } local { type: "zeros" } }
  }
)pb";

std::vector<float> Floats(const Tensor& t) { return {t.floats().begin(), t.floats().end()}; }

// An initializer that fills the slice with its buffer's number, and counts its calls.
struct Init {
  int calls = 0;
  absl::Status operator()(const v1::Instruction& init, Tensor* out) {
    ++calls;
    const Shape shape = *Shape::FromProto(init.slice_shape());
    *out = Tensor::Float(shape, std::vector<float>(shape.num_elements(), 1.0f + init.output()));
    return absl::OkStatus();
  }
};

TEST(VariableStoreTest, InitialisesLoadsAndStoresTheUpdates) {
  const v1::Program program = ParseProgram(kProgram);
  VariableStore store(program, {1});
  VariableStore::Buffers buffers(4);
  Init init;
  auto run_init = [&](const v1::Instruction& i, Tensor* out) { return init(i, out); };
  ASSERT_OK(store.Load(&buffers, run_init));
  EXPECT_EQ(init.calls, 2);
  ASSERT_TRUE(buffers[0].has_value() && buffers[1].has_value());
  EXPECT_EQ(Floats(*buffers[0]), (std::vector<float>{1, 1}));
  EXPECT_EQ(Floats(*buffers[1]), (std::vector<float>{2, 2, 2, 2}));
  EXPECT_TRUE(store.slices().empty());  // moved into the buffers
  // The step writes the updates; a successful step keeps them.
  buffers[2] = Tensor::Float(Shape{{"n", 2}}, {5, 6});
  buffers[3] = Tensor::Float(Shape{{"n", 4}}, {7, 7, 7, 7});
  store.BeginStep();
  store.Store(/*step_succeeded=*/true, &buffers);
  EXPECT_EQ(Floats(store.slices().at("w")), (std::vector<float>{5, 6}));
  EXPECT_EQ(Floats(store.slices().at("b")), (std::vector<float>{7, 7, 7, 7}));
  EXPECT_FALSE(buffers[2].has_value());  // moved, not copied
  ASSERT_NE(store.MovedInto(2), nullptr);  // and still readable as buffer 2
  EXPECT_EQ(Floats(*store.MovedInto(2)), (std::vector<float>{5, 6}));
  EXPECT_EQ(store.MovedInto(0), nullptr);
  // The next load moves the slices in without initialising.
  VariableStore::Buffers next(4);
  store.BeginStep();
  EXPECT_EQ(store.MovedInto(2), nullptr);
  ASSERT_OK(store.Load(&next, run_init));
  EXPECT_EQ(init.calls, 2);
  EXPECT_EQ(Floats(*next[0]), (std::vector<float>{5, 6}));
}

TEST(VariableStoreTest, AFailedStepKeepsTheValuesItLoaded) {
  const v1::Program program = ParseProgram(kProgram);
  VariableStore store(program, {1});
  ASSERT_OK(store.Set("w", Tensor::Float(Shape{{"n", 2}}, {3, 4})));
  VariableStore::Buffers buffers(4);
  Init init;
  ASSERT_OK(store.Load(&buffers, [&](const v1::Instruction& i, Tensor* out) { return init(i, out); }));
  EXPECT_EQ(init.calls, 1);  // b only
  buffers[2] = Tensor::Float(Shape{{"n", 2}}, {9, 9});  // an update the failed step wrote
  store.Store(/*step_succeeded=*/false, &buffers);
  EXPECT_EQ(Floats(store.slices().at("w")), (std::vector<float>{3, 4}));
  EXPECT_EQ(Floats(store.slices().at("b")), (std::vector<float>{2, 2, 2, 2}));
}

TEST(VariableStoreTest, ABufferFeedingTwoVariablesIsCopiedForTheFirst) {
  v1::Program program = ParseProgram(kProgram);
  program.mutable_variables(1)->mutable_layout()->set_mesh_axis(0, 0);  // b split like w
  program.mutable_variables(1)->set_update_buffer(2);                   // b = w's update
  VariableStore store(program, {0});
  VariableStore::Buffers buffers(4);
  buffers[2] = Tensor::Float(Shape{{"n", 2}}, {1, 2});
  store.Store(/*step_succeeded=*/true, &buffers);
  EXPECT_EQ(Floats(store.slices().at("w")), (std::vector<float>{1, 2}));
  EXPECT_EQ(Floats(store.slices().at("b")), (std::vector<float>{1, 2}));
  EXPECT_FALSE(buffers[2].has_value());  // the last use moved it
  // An unwritten update buffer leaves a slice as it is: w's buffer 0 was never loaded.
  VariableStore::Buffers empty(4);
  store.Store(/*step_succeeded=*/false, &empty);
  EXPECT_EQ(Floats(store.slices().at("w")), (std::vector<float>{1, 2}));
}

TEST(VariableStoreTest, ErrorsNameTheVariableAndTheProcessor) {
  v1::Program program = ParseProgram(kProgram);
  VariableStore store(program, {1});
  // Set: a name that is no variable; a slice of another shape or dtype.
  EXPECT_TRUE(StatusIs(store.Set("v", Tensor::Float(Shape{{"n", 2}}, {0, 0})),
                       absl::StatusCode::kNotFound, {"'v'"}));
  EXPECT_TRUE(StatusIs(store.Set("w", Tensor::Float(Shape{{"n", 4}}, {0, 0, 0, 0})),
                       absl::StatusCode::kInvalidArgument,
                       {"variable 'w'", "processor (1)", "[n:2]", "[n:4]"}))
      << store.Set("w", Tensor::Float(Shape{{"n", 4}}, {0, 0, 0, 0}));
  EXPECT_TRUE(StatusIs(store.Set("w", Tensor::Int(Shape{{"n", 2}}, {0, 0})),
                       absl::StatusCode::kInvalidArgument, {"float32", "int32"}));
  EXPECT_TRUE(store.slices().empty());
  // Load: an initializer's error, with its code; buffers out of range.
  VariableStore::Buffers buffers(4);
  const absl::Status init = store.Load(&buffers, [](const v1::Instruction&, Tensor*) {
    return absl::UnimplementedError("no kernel");
  });
  EXPECT_TRUE(StatusIs(init, absl::StatusCode::kUnimplemented,
                       {"initializing variable 'w'", "processor (1)", "no kernel"}))
      << init;
  program.mutable_variables(1)->set_update_buffer(4);
  VariableStore bad(program, {1});
  const absl::Status range = bad.Load(&buffers, Init());
  EXPECT_TRUE(StatusIs(range, absl::StatusCode::kInvalidArgument,
                       {"variable 'b'", "buffers 1 and 4", "has 4"}))
      << range;
}

}  // namespace
}  // namespace meshrt
