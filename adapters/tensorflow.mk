# TensorFlow adapter: an op library for tf.load_op_library, built against the
# headers and libtensorflow_framework.so.2 of the TensorFlow that $(PYTHON)
# imports (only TF_* symbols of it are used).
ifeq ($(call have_module,tensorflow),1)
ADAPTERS += $(ADAPTER_DIR)/libopforge_tensorflow.so
endif
ADAPTER_TESTS += test-tensorflow
DEMOS += examples/mlp_tensorflow.py examples/block_keras.py

TF_SYSCONFIG = $(shell $(PYTHON) -c 'import os; os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"; \
  import tensorflow as tf; v = tf.sysconfig.get_$(1)(); print(v if isinstance(v, str) else " ".join(v))' 2>/dev/null)

$(ADAPTER_DIR)/libopforge_tensorflow.so: adapters/tensorflow.c adapters/slots.h include/opforge.h $(LIB_SO)
	@mkdir -p $(dir $@)
	@inc='$(call TF_SYSCONFIG,include)'; lflags='$(call TF_SYSCONFIG,link_flags)'; \
	  test -n "$$inc" || { echo "tensorflow.mk: cannot import tensorflow with $(PYTHON)"; exit 1; }; \
	  echo "$(CC) ... adapters/tensorflow.c -o $@"; \
	  $(CC) $(ADAPTER_CFLAGS) -isystem "$$inc" adapters/tensorflow.c -o $@ $(ADAPTER_LDFLAGS) $$lflags

.PHONY: test-tensorflow
test-tensorflow: venv
	cd tests/tensorflow && $(ADAPTER_PYTEST)

.PHONY: bench-tensorflow
bench-tensorflow: venv
	$(VPY) bench/bench_tensorflow.py
