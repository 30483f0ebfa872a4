# Builds the libFuzzer target with clang-14 outside Bazel (Bazel here uses gcc, and libFuzzer needs
# clang's -fsanitize=fuzzer). Incremental: make tracks every header through -MMD. Run from the
# repository root (fuzz/run.sh does):  make -f fuzz/fuzz.mk -j2
#
#   out/fuzz/graph_fuzzer   the fuzz target (fuzz/graph_fuzzer.cc)
#   out/fuzz/make_corpus    writes the seed corpus and dictionary (fuzz/make_corpus.cc):
#                           `make -f fuzz/fuzz.mk corpus`
#
# Everything links against Debian's gcc-built Abseil and Protobuf: clang uses the same libstdc++,
# so the C++ ABI matches. Only meshrt's own code (and the generated protos) is instrumented.

OUT ?= out/fuzz
CXX := clang++-14
PROTOC := /usr/bin/protoc

SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all
CXXFLAGS := -std=c++17 -O1 -g -fno-omit-frame-pointer $(SANITIZE) -fsanitize=fuzzer-no-link \
            -I. -I$(OUT)/gen -MMD -MP -Wall -Wno-unused-function
# The same Abseil libraries as third_party/system/system.BUILD's :absl target.
LIBS := -lprotobuf \
    -labsl_statusor -labsl_status -labsl_strerror -labsl_str_format_internal -labsl_cord \
    -labsl_cordz_info -labsl_cord_internal -labsl_cordz_functions -labsl_cordz_handle \
    -labsl_hash -labsl_city -labsl_bad_variant_access -labsl_low_level_hash -labsl_raw_hash_set \
    -labsl_bad_optional_access -labsl_hashtablez_sampler -labsl_exponential_biased \
    -labsl_synchronization -labsl_graphcycles_internal -labsl_stacktrace -labsl_symbolize \
    -labsl_debugging_internal -labsl_demangle_internal -labsl_malloc_internal -labsl_time \
    -labsl_civil_time -labsl_strings -labsl_strings_internal -labsl_base -labsl_spinlock_wait \
    -labsl_int128 -labsl_throw_delegate -labsl_raw_logging_internal -labsl_time_zone \
    -labsl_log_severity -latomic -lrt -lpthread

# Every proto/*.proto, so a new message file needs no change here (--cpp_out makes messages only,
# no gRPC code, from the service files too).
PROTOS := $(basename $(notdir $(wildcard proto/*.proto)))
PROTO_HDRS := $(PROTOS:%=$(OUT)/gen/proto/%.pb.h)
PROTO_SRCS := $(PROTOS:%=$(OUT)/gen/proto/%.pb.cc)
# The language: every package of core/ but its test helpers, and the util/ helpers it uses.
CORE_SRCS := $(filter-out %_test.cc core/testing/%,$(shell find core util -name '*.cc' | sort))
MODEL_SRCS := $(filter-out %_test.cc,$(wildcard models/*.cc))

obj = $(patsubst %.cc,$(OUT)/obj/%.o,$(patsubst $(OUT)/gen/%,%,$(1)))
LIB_OBJS := $(call obj,$(PROTO_SRCS)) $(call obj,$(CORE_SRCS))
FUZZER_OBJS := $(LIB_OBJS) $(call obj,fuzz/graph_fuzzer.cc fuzz/request_mutator.cc)
CORPUS_OBJS := $(LIB_OBJS) $(call obj,$(MODEL_SRCS)) $(call obj,fuzz/make_corpus.cc)

.PHONY: all corpus
all: $(OUT)/graph_fuzzer

$(OUT)/graph_fuzzer: $(FUZZER_OBJS)
	@echo "  LINK $@"
	@$(CXX) -fsanitize=fuzzer $(SANITIZE) -o $@ $^ $(LIBS)

$(OUT)/make_corpus: $(CORPUS_OBJS)
	@echo "  LINK $@"
	@$(CXX) $(SANITIZE) -o $@ $^ $(LIBS)

# Regenerates fuzz/corpus/ and fuzz/graph.dict from examples/graphs and the models (see
# fuzz/README.md).
corpus: $(OUT)/make_corpus
	rm -f fuzz/corpus/*
	$(OUT)/make_corpus examples/graphs fuzz/corpus fuzz/graph.dict

# One protoc run makes every message (they import each other); a stamp keeps it to one run.
$(PROTO_HDRS) $(PROTO_SRCS): $(OUT)/gen/.stamp
$(OUT)/gen/.stamp: $(PROTOS:%=proto/%.proto) fuzz/fuzz.mk
	@mkdir -p $(OUT)/gen
	@echo "  PROTOC $(OUT)/gen/proto"
	@$(PROTOC) --proto_path=. --cpp_out=$(OUT)/gen $(filter %.proto,$^)
	@touch $@

$(OUT)/obj/proto/%.o: $(OUT)/gen/proto/%.cc
	@mkdir -p $(dir $@)
	@echo "  CXX $<"
	@$(CXX) $(CXXFLAGS) -c -o $@ $<

# Every meshrt source includes generated headers: they must exist before the first compile.
$(OUT)/obj/%.o: %.cc | $(OUT)/gen/.stamp
	@mkdir -p $(dir $@)
	@echo "  CXX $<"
	@$(CXX) $(CXXFLAGS) -c -o $@ $<

-include $(shell find $(OUT)/obj -name '*.d' 2>/dev/null)
