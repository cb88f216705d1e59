# PyTorch adapter: adapters/torch.c registers the op table with the dispatcher
# through torch's stable C ABI. It needs no torch header, only libtorch_cpu.so
# to link against (found without importing torch): it is linked by its soname,
# without an rpath, and binds to the copy `import torch` has already loaded.
# -fexceptions: torch's errors are C++ exceptions thrown through the boxed
# kernel's C frame.
ifeq ($(call have_module,torch),1)
ADAPTERS += $(ADAPTER_DIR)/libopforge_torch.so
TORCH_LIB_DIR := $(shell $(PYTHON) -c 'import importlib.util as u, os; \
    print(os.path.join(u.find_spec("torch").submodule_search_locations[0], "lib"))' 2>/dev/null)
endif
ADAPTER_TESTS += test-torch
DEMOS += examples/mlp_torch.py examples/block_torch.py

$(ADAPTER_DIR)/libopforge_torch.so: adapters/torch.c adapters/slots.h include/opforge.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(ADAPTER_CFLAGS) -fexceptions adapters/torch.c -o $@ $(ADAPTER_LDFLAGS) -L$(TORCH_LIB_DIR) -ltorch_cpu -ldl

.PHONY: test-torch bench-torch
test-torch: venv
	cd tests/torch && $(ADAPTER_PYTEST)

bench-torch: venv
	$(VPY) bench/bench_torch.py
