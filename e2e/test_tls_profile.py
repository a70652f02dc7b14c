"""The TLS profile (--tls-profile, Mozilla's Server Side TLS 6.0) as testssl.sh, Debian's
package, sees it from outside (issue 17): no finding of severity MEDIUM or above, and the
protocols and ciphers offered are exactly the profile's.

The certificate is one a real site would have (a CA's leaf for the address testssl.sh connects
to, 90 days, a CRL distribution point), so that testssl.sh's certificate checks judge the
configuration, not a test shortcut. testssl.sh never phones out (no --phone-out): the CRL URL is
never fetched. Each scan takes about a minute."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import _openssl, https_port, report, tls_connect, wait_until

pytestmark = pytest.mark.skipif(shutil.which("testssl") is None,
                                reason="testssl.sh is installed by scripts/install-deps")

# What each profile must offer, as testssl.sh names it (OpenSSL names), for an ECDSA key.
TLS13 = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
INTERMEDIATE_TLS12 = {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                      "ECDHE-ECDSA-CHACHA20-POLY1305"}
SEVERE = {"MEDIUM", "HIGH", "CRITICAL"}


@pytest.fixture(scope="module")
def site_cert(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("site")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=Tidegate Profile Test CA",
             "-days", "365", cwd=d)
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "site.key", "-out", "site.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "site.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                "crlDistributionPoints=URI:http://127.0.0.1/ca.crl\n"
                                "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n")
    _openssl("x509", "-req", "-in", "site.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-set_serial", "7001", "-days", "90", "-extfile", "site.ext", "-out", "site.crt",
             cwd=d)
    (d / "chain.crt").write_bytes((d / "site.crt").read_bytes() + (d / "ca.crt").read_bytes())
    return d


def start(stack_factory, site: Path, profile: str | None):
    args = ["--default-ssl-certificate", str(site / "chain.crt"),
            "--default-ssl-key", str(site / "site.key")]
    if profile:
        args += ["--tls-profile", profile]
    s = stack_factory(dataplane_args=args)
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    port = https_port(s.dataplane)
    tls_connect(port, None).close()  # listening and handshaking before the scan starts
    return s, port


def scan(site: Path, port: int, out: Path, *sections: str) -> list[dict]:
    """Runs testssl.sh on 127.0.0.1:port; returns its findings (id, severity, finding)."""
    json_file = out / "testssl.json"
    r = subprocess.run(["testssl", "--quiet", "--color", "0", "--warnings", "off",
                        "--add-ca", str(site / "ca.crt"), "--jsonfile-pretty", str(json_file),
                        *sections, f"https://127.0.0.1:{port}/"],
                       capture_output=True, text=True, timeout=400)
    (out / "testssl.txt").write_text(r.stdout + r.stderr)
    assert json_file.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(json_file.read_text())
    findings = []
    for result in doc["scanResult"]:
        for section, items in result.items():
            if isinstance(items, list):
                findings += [dict(f, section=section) for f in items if isinstance(f, dict)]
    assert findings, "testssl.sh reported nothing: " + r.stdout[-3000:]
    return findings


def offered(findings: list[dict]) -> tuple[dict[str, str], set[str], set[str]]:
    """(protocol -> finding, TLS 1.2 ciphers, TLS 1.3 ciphers) from a scan with -p -E."""
    protocols = {f["id"]: f["finding"] for f in findings if f["section"] == "protocols"}
    tls12, tls13 = set(), set()
    for f in findings:
        if f["id"].startswith("cipher-tls1_2_"):
            tls12.add(f["finding"].split()[3])
        elif f["id"].startswith("cipher-tls1_3_"):
            tls13.add(f["finding"].split()[3])
    return protocols, tls12, tls13


def severe(findings: list[dict]) -> list[str]:
    return [f"{f['id']} {f['severity']}: {f['finding']}" for f in findings
            if f.get("severity") in SEVERE]


def test_intermediate_profile_passes_testssl(stack_factory, site_cert, tmp_path):
    _, port = start(stack_factory, site_cert, None)  # intermediate is the default
    findings = scan(site_cert, port, tmp_path, "-p", "-s", "-f", "-E", "-S", "-P", "-U")
    assert severe(findings) == []
    protocols, tls12, tls13 = offered(findings)
    assert protocols["TLS1_2"] == "offered", protocols
    assert protocols["TLS1_3"].startswith("offered"), protocols
    for old in ("SSLv2", "SSLv3", "TLS1", "TLS1_1"):
        assert protocols[old] == "not offered", protocols
    assert tls12 == INTERMEDIATE_TLS12
    assert tls13 == TLS13
    ids = {f["id"]: f for f in findings}
    assert ids["cipher_order"]["finding"] == "server", ids["cipher_order"]
    report(f"testssl.sh, intermediate: {len(findings)} findings, none MEDIUM or above; "
           f"offered TLS 1.2 {sorted(tls12)}, TLS 1.3 {sorted(tls13)}")


def test_modern_profile_offers_tls13_only(stack_factory, site_cert, tmp_path):
    _, port = start(stack_factory, site_cert, "modern")
    findings = scan(site_cert, port, tmp_path, "-p", "-E", "-S")
    assert severe(findings) == []
    protocols, tls12, tls13 = offered(findings)
    assert protocols["TLS1_3"].startswith("offered"), protocols
    for old in ("SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2"):
        assert protocols[old] == "not offered", protocols
    assert tls12 == set()
    assert tls13 == TLS13


def test_unknown_profile_is_refused_at_start(stack_factory):
    s = stack_factory(dataplane_args=["--tls-profile", "old"])
    s.dataplane.start()
    s.dataplane.expected_exit = True
    wait_until(lambda: s.dataplane.returncode() is not None, 5, "the data plane to exit")
    assert s.dataplane.returncode() == 2
    assert "--tls-profile must be intermediate or modern" in s.dataplane.log()
