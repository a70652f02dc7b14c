#!/usr/bin/env bash
# Regenerates deploy/tidegate.yaml (plain manifests for users without Helm) from helm/tidegate with
# its default values: a Namespace, the CRDs, then `helm template tidegate helm/tidegate -n tidegate`.
# test_chart.py::test_deploy_manifest_is_helm_template fails when the file drifts from this output.
# The text is made by chartlib.render_deploy_manifest, so that the script and the test agree.
set -euo pipefail
cd "$(dirname "$0")"
helm_dir=$(./build-tools.sh)
HELM="$helm_dir/helm" python3 - <<'PY'
import os, sys, tempfile
from pathlib import Path
sys.path.insert(0, "."); sys.path.insert(0, "..")
import chartlib
helm = chartlib.Helm(Path(os.environ["HELM"]), Path(tempfile.mkdtemp(prefix="tg-helm-")))
chartlib.DEPLOY.write_text(chartlib.render_deploy_manifest(helm))
print(f"wrote {chartlib.DEPLOY}")
PY
