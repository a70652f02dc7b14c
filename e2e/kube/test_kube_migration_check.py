"""The migration check against a real kube-apiserver: tidegate-controller
--check-nginx-annotations --kubeconfig lists the cluster's Ingresses (every class: the point is
to see what switching would change) and prints each nginx annotation's verdict."""

from __future__ import annotations

import os
import subprocess

from kubeapps import kube_ingress


def test_check_nginx_annotations_reads_the_cluster(cluster, namespace):
    cluster.apply(
        kube_ingress("shop", namespace, "shop.example", "web", ingress_class="nginx",
                     annotations={"nginx.ingress.kubernetes.io/proxy-body-size": "8m",
                                  "nginx.ingress.kubernetes.io/server-snippet": "return 200;",
                                  "nginx.ingress.kubernetes.io/limit-rps": "ten",
                                  "nginx.ingress.kubernetes.io/mirror-target": "https://m/",
                                  "nginx.ingress.kubernetes.io/ssl-passthrough": "true"}),
        kube_ingress("plain", namespace, "plain.example", "web"))
    binary = os.path.join(os.environ["TIDEGATE_BIN_DIR"], "tidegate-controller")
    out = subprocess.run([binary, "--check-nginx-annotations", "--kubeconfig",
                          str(cluster.kubeconfig), "--watch-namespace", namespace],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Ingress {namespace}/shop", out.stdout
    assert lines[1].startswith("  invalid     limit-rps: invalid value \"ten\""), out.stdout
    assert lines[2].startswith("  unsupported mirror-target: ignored; not for Ingresses"), out.stdout
    assert lines[3] == "  supported   proxy-body-size", out.stdout
    assert lines[4] == ("  refused     server-snippet: nginx configuration text is never "
                        "interpreted"), out.stdout
    assert lines[5].startswith("  partly      ssl-passthrough: per exact rule host"), out.stdout
    assert lines[6] == ("1 Ingresses with nginx annotations: 1 supported, 1 partly, 1 invalid, "
                        "1 unsupported, 1 refused"), out.stdout
