import pytest

from reconciler.topology import secrets


def test_secret_keys_detected():
    for key in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret", "basic.auth.user.info"):
        assert secrets.is_secret_key(key), key
    assert not secrets.is_secret_key("security.protocol")


def test_resolve_reports_every_missing_variable():
    env = {"A": "alpha"}
    assert secrets.resolve("x-${A}-y", env) == "x-alpha-y"
    with pytest.raises(secrets.UnresolvedReference) as exc:
        secrets.resolve_config({"a": "${MISSING1}", "b": "${A}", "c": "${MISSING2}"}, env)
    assert exc.value.names == ["MISSING1", "MISSING2"]


def test_redactor_hides_resolved_values():
    r = secrets.Redactor()
    r.add_from({"sasl.password": "${PW}"}, {"PW": "s3cr3t-value"})
    assert r("connect failed with s3cr3t-value") == "connect failed with ***"
