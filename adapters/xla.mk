# XLA FFI adapter (adapters/xla.c) and its Python side, opforge.jax.
# Built against the FFI headers of the jaxlib that $(PYTHON) imports
# (jax.ffi.include_dir()), so the handlers report that jaxlib's API version.
ifeq ($(call have_module,jaxlib),1)
ADAPTERS += $(ADAPTER_DIR)/libopforge_xla.so
XLA_INCLUDE := $(shell $(PYTHON) -c 'import jax.ffi; print(jax.ffi.include_dir())' 2>/dev/null)
endif
ADAPTER_TESTS += test-jax
DEMOS += examples/mlp_jax.py

$(ADAPTER_DIR)/libopforge_xla.so: adapters/xla.c adapters/slots.h include/opforge.h $(LIB_SO)
	@mkdir -p $(dir $@)
	@test -n "$(XLA_INCLUDE)" || { echo "libopforge_xla.so: jax.ffi.include_dir() not found with $(PYTHON)" >&2; exit 1; }
	$(CC) $(ADAPTER_CFLAGS) -isystem $(XLA_INCLUDE) adapters/xla.c -o $@ $(ADAPTER_LDFLAGS)

.PHONY: test-jax bench-jax
test-jax: venv
	cd tests/jax && $(ADAPTER_PYTEST)

bench-jax: venv
	$(VPY) bench/bench_jax.py
