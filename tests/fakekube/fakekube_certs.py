"""Test PKI and kubeconfig for fakekube.

Generates a throw-away CA, a server certificate for 127.0.0.1/localhost, a
client certificate (CN=uplink-test, O=system:masters) and a bearer token, and
writes a kubeconfig with three contexts:

* ``local-k8s-admin``: client certificate (also the current-context)
* ``fake-token``: bearer token
* ``fake-anon``: no credentials at all
"""

import base64
import datetime
import ipaddress
import os
import secrets

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_CN = "uplink-test"
CLIENT_ORG = "system:masters"


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(cn, org=None):
    attrs = []
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _builder(subject, issuer, pub):
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(issuer).public_key(pub)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=30)))


class TestPKI:
    """All material as PEM bytes, written under ``dir`` by :meth:`write`."""

    def __init__(self):
        ca_key = _key()
        ca_name = _name("fakekube-ca")
        ca = (_builder(ca_name, ca_name, ca_key.public_key())
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .add_extension(x509.KeyUsage(
                  digital_signature=True, content_commitment=False, key_encipherment=False,
                  data_encipherment=False, key_agreement=False, key_cert_sign=True,
                  crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
              .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))

        def leaf(subject, usage, san=None):
            key = _key()
            b = (_builder(subject, ca_name, key.public_key())
                 .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                 .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                 .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                     ca_key.public_key()), critical=False))
            if san:
                b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
            return key, b.sign(ca_key, hashes.SHA256())

        srv_key, srv = leaf(_name("fakekube"), ExtendedKeyUsageOID.SERVER_AUTH, [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ])
        cli_key, cli = leaf(_name(CLIENT_CN, CLIENT_ORG), ExtendedKeyUsageOID.CLIENT_AUTH)

        self.ca_pem = _pem_cert(ca)
        self.ca_key_pem = _pem_key(ca_key)
        self.server_cert_pem = _pem_cert(srv)
        self.server_key_pem = _pem_key(srv_key)
        self.client_cert_pem = _pem_cert(cli)
        self.client_key_pem = _pem_key(cli_key)
        self.token = "fakekube-" + secrets.token_hex(16)
        self._ca = ca
        self._ca_key = ca_key
        self._ca_name = ca_name

    def issue_client(self, cn, org=None):
        """Another client certificate signed by the test CA: (cert_pem, key_pem)."""
        key = _key()
        cert = (_builder(_name(cn, org), self._ca_name, key.public_key())
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(self._ca_key, hashes.SHA256()))
        return _pem_cert(cert), _pem_key(key)

    def write(self, d):
        """Write ca.crt, server.crt/key, client.crt/key, token; return the paths."""
        os.makedirs(d, exist_ok=True)
        files = {
            "ca.crt": self.ca_pem,
            "server.crt": self.server_cert_pem,
            "server.key": self.server_key_pem,
            "client.crt": self.client_cert_pem,
            "client.key": self.client_key_pem,
            "token": self.token.encode(),
        }
        paths = {}
        for name, data in files.items():
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.write(data)
            if name.endswith(".key") or name == "token":
                os.chmod(p, 0o600)
            paths[name] = p
        return paths


def _b64(data):
    return base64.b64encode(data).decode()


def kubeconfig_dict(pki, url):
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "current-context": "local-k8s-admin",
        "clusters": [{
            "name": "fakekube",
            "cluster": {"server": url, "certificate-authority-data": _b64(pki.ca_pem)},
        }],
        "users": [
            {"name": "local-k8s-admin", "user": {
                "client-certificate-data": _b64(pki.client_cert_pem),
                "client-key-data": _b64(pki.client_key_pem)}},
            {"name": "fake-token", "user": {"token": pki.token}},
            {"name": "fake-anon", "user": {}},
        ],
        "contexts": [
            {"name": "local-k8s-admin", "context": {"cluster": "fakekube", "user": "local-k8s-admin"}},
            {"name": "fake-token", "context": {"cluster": "fakekube", "user": "fake-token"}},
            {"name": "fake-anon", "context": {"cluster": "fakekube", "user": "fake-anon"}},
        ],
    }


def write_kubeconfig(path, pki, url):
    with open(path, "w") as f:
        yaml.safe_dump(kubeconfig_dict(pki, url), f, sort_keys=False)
    os.chmod(path, 0o600)
    return path
