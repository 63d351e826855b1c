# Two commands set everything up on a fresh clone: `make demo` and `make test`.
# A second run reuses the venv and the cached Delta jars (stamp files below).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
JARS   := $(VENV)/share/lakehouse/jars
CLASSES := $(VENV)/share/lakehouse/.classes
POM    := lakehouse/jvm/pom.xml
S3POM  := lakehouse/jvm/s3-pom.xml
S3JARS := $(VENV)/share/lakehouse/jars-s3
PYTEST_ARGS ?=
# Two pytest workers, each with its own SparkSession, a scope of tests each at a time: a test
# module, or a test that runs apart from it, heaviest first (tests/conftest.py schedules them).
WORKERS ?= 2
XDIST  := -n $(WORKERS) --dist loadscope

.PHONY: all setup s3 demo test test-fast soak check-tools clean lint notebooks bytecode collected

all: setup

# What Spark needs (the packages, Delta's jars, the class archive); `setup` adds the packages' bytecode.
SPARK_SETUP := check-tools $(VENV)/.installed $(JARS)/.resolved $(CLASSES)
setup: $(SPARK_SETUP) $(VENV)/.compiled

check-tools:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null || \
	  { echo "error: Python 3.11+ is required (found: $$($(PYTHON) --version 2>&1)); set PYTHON=/path/to/python3.11" >&2; exit 1; }
	@command -v java >/dev/null 2>&1 || \
	  { echo "error: Java 17+ is required for Spark and was not found on PATH (install OpenJDK 17)" >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	  [ -n "$$v" ] && [ "$$v" -ge 17 ] || \
	  { echo "error: Java 17+ is required for Spark (found: $$(java -version 2>&1 | head -1))" >&2; exit 1; }

# The packages are installed with uv (from the package index, into the venv): it fetches and
# unpacks in parallel, in about a third of pip's time for the same packages.
# pyspark is published as a source archive only, and building its wheel (400 MB of jars, zipped)
# takes about 15 s of one core. uv built it again at every install here (the index's answers are
# never fresh in its cache, which grew by the 850 MB wheel each time), so the wheel is built once
# per machine into the user's cache and every install takes it from there (if that build fails,
# uv builds it as before).
WHEELS  := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/lakehouse/wheels
PYSPARK := $(shell sed -n 's/^ *"pyspark==\([^"]*\)".*/\1/p' pyproject.toml)
$(VENV)/.installed: pyproject.toml
	@echo ">> creating $(VENV) and installing lakehouse (first run takes a few minutes)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	@ls "$(WHEELS)"/pyspark-$(PYSPARK)-*.whl >/dev/null 2>&1 || { \
	  echo ">> building pyspark $(PYSPARK)'s wheel once into $(WHEELS)"; \
	  mkdir -p "$(WHEELS)" && tmp=$$(mktemp -d "$(WHEELS)/.build.XXXXXX") && \
	  { $(BIN)/pip wheel --quiet --no-deps --wheel-dir "$$tmp" "pyspark==$(PYSPARK)" && mv "$$tmp"/pyspark-*.whl "$(WHEELS)/" \
	    || echo "note: could not build pyspark's wheel; uv builds it"; }; rm -rf "$$tmp"; }
	$(BIN)/uv pip install --quiet --python $(BIN)/python --find-links "$(WHEELS)" -e '.[test]'
	@touch $@

# The packages' bytecode, compiled once (beside the jars and the class archive under make -j). It
# matters: where PYTHONDONTWRITEBYTECODE is set, a package without it is compiled again by every
# process that imports it (about 1.2 s of CPU for each lakehouse command).
$(VENV)/.compiled: $(VENV)/.installed
	@$(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
	  >/dev/null
	@touch $@

# Delta Lake's JVM jars, resolved once from Maven Central with Maven and handed to Spark via
# spark.jars (lakehouse/session.py). Without Maven, Spark resolves them itself with Ivy.
$(JARS)/.resolved: $(POM) $(VENV)/.installed
	@mkdir -p $(JARS)
	@if command -v mvn >/dev/null 2>&1; then \
	  echo ">> resolving Delta Lake jars from Maven Central into $(JARS)"; \
	  mvn -q -B -f $(POM) dependency:copy-dependencies -DoutputDirectory=$(abspath $(JARS)) \
	    -DincludeGroupIds=io.delta || { echo "error: could not resolve Delta jars with Maven (see above)" >&2; exit 1; }; \
	else \
	  echo "note: mvn not found; Spark will resolve Delta's jars with Ivy on first start"; \
	fi
	@touch $@

# hadoop-aws and the AWS SDK bundle for an s3:// warehouse (`make s3`; `make test` needs them): their
# paths in Maven's local repository, recorded once; lakehouse.spark.session adds them to spark.jars.
s3: setup $(S3JARS)/classpath.txt $(S3JARS)/lakehouse-delta-s3.jar

$(S3JARS)/classpath.txt: $(S3POM) $(VENV)/.installed $(JARS)/.resolved
	@mkdir -p $(S3JARS)
	@command -v mvn >/dev/null 2>&1 || { echo "error: an s3:// warehouse needs Maven (mvn) to resolve hadoop-aws" >&2; exit 1; }
	@echo ">> resolving hadoop-aws and the AWS SDK bundle from Maven Central (once; about 540 MB)"
	@mvn -q -B -f $(S3POM) dependency:build-classpath -Dmdep.outputFile=$(abspath $@).tmp -Dmdep.pathSeparator=, \
	  || { echo "error: could not resolve hadoop-aws with Maven (see above)" >&2; exit 1; }
	@mv $@.tmp $@

# lakehouse's Delta LogStore for S3 (commits as conditional PUTs: concurrent writers never lose one),
# compiled against the Hadoop, Delta and AWS SDK jars Spark runs with.
S3LOGSTORE := lakehouse/jvm/src/lakehouse/delta/ConditionalPutLogStore.java
$(S3JARS)/lakehouse-delta-s3.jar: $(S3LOGSTORE) $(S3JARS)/classpath.txt $(JARS)/.resolved
	@command -v javac >/dev/null 2>&1 || { echo "error: building the S3 LogStore needs a JDK (javac 17+)" >&2; exit 1; }
	@echo ">> compiling lakehouse's Delta LogStore for S3"
	@rm -rf $(S3JARS)/.build && mkdir -p $(S3JARS)/.build
	@pyspark=$$($(BIN)/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'); \
	  cp="$$(ls $$pyspark/jars/hadoop-client-api-*.jar):$$(ls $(JARS)/delta-storage-*.jar):$$(tr ',' ':' < $(S3JARS)/classpath.txt)"; \
	  javac --release 17 -nowarn -cp "$$cp" -d $(S3JARS)/.build $(S3LOGSTORE) && \
	  jar cf $@.tmp -C $(S3JARS)/.build . && mv $@.tmp $@
	@rm -rf $(S3JARS)/.build

# The Spark driver's class archive (AppCDS, lakehouse/spark/class_archive.py), recorded once from a
# real run of lakehouse's operations: every later Spark start maps those classes (about 35% faster).
$(CLASSES): $(JARS)/.resolved
	@echo ">> recording the Spark driver's class archive (once, about a minute)"
	$(BIN)/python -m lakehouse.warmup
	@touch $@

demo: setup
	$(BIN)/lakehouse demo --reset

# Spark's set-up, the S3 extras and lint at once (lint needs only the venv: it runs beside Maven,
# javac and the class archive's recording), then the suite. The suite writes the packages' bytecode
# as its processes import them (PYTHONDONTWRITEBYTECODE off): the few hundred modules they use,
# where `setup` compiles every installed file (about 38 s of CPU, most of it never imported).
# Lint and the collection run niced: the class archive's recording is the set-up's longest step.
test: check-tools
	@$(MAKE) --no-print-directory -j4 $(SPARK_SETUP) $(S3JARS)/classpath.txt $(S3JARS)/lakehouse-delta-s3.jar \
	  lint collected bytecode NICE="nice -n 10"
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest $(XDIST) --durations=25 $(PYTEST_ARGS)

# The bytecode of what every pytest worker imports to collect the suite (pytest, hypothesis,
# pyspark, pyarrow, lakehouse, the tests), written by one collection beside the set-up: the two
# workers would otherwise each compile it at their start, at once, on the suite's critical path.
collected: $(VENV)/.installed
	@PYTHONDONTWRITEBYTECODE= $(NICE) $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider >/dev/null

test-fast: $(SPARK_SETUP) bytecode
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest $(XDIST) -m "not spark and not slow" $(PYTEST_ARGS)

# lakehouse's and the tests' own bytecode, compiled once before a run: the suite starts hundreds of
# Python processes (commands, Spark's Python workers), and each would otherwise compile what it
# imports where PYTHONDONTWRITEBYTECODE is set (an editable install has no bytecode of its own).
bytecode: $(VENV)/.installed
	@$(BIN)/python -m compileall -q -j 0 lakehouse tests >/dev/null

# The soak (not in `make test`): SOAK_MINUTES on an S3 API server and a Spark standalone cluster on
# loopback, two producer processes, a landing prefix that keeps filling, `jobs run` every minute and
# queries on both engines; verify and exactly-once at the end, a JSON report (tests/soak.py).
SOAK_MINUTES ?= 30
soak: s3
	$(BIN)/python -m tests.soak --minutes $(SOAK_MINUTES)

# Re-execute notebooks/*.ipynb in place, each in a kernel of this venv on a fresh warehouse, so
# that their committed outputs come from a real run.
notebooks: setup
	$(BIN)/python -m tests.notebook_runner --inplace

# ruff (with pydocstyle's rules for public definitions), mypy, and import-linter's contracts
# (pyproject.toml: the package's layers); `make test` runs it first, so CI holds the layers.
NICE ?=
lint: $(VENV)/.installed
	$(NICE) $(BIN)/ruff check lakehouse tests
	$(NICE) $(BIN)/mypy
	$(NICE) $(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) warehouse .pytest_cache
