"""A malformed security-group rule is refused in words a tenant reads (the console shows them on the field the
error names), not in the API's field names."""
import pytest

from apps.networking.sg_rules import RuleError, canonicalize


@pytest.mark.parametrize(("rule", "field", "words"), [
    ({"protocol": "tcp", "port_range_min": 443, "port_range_max": 80}, "port_range_min",
     "The first port must not be greater than the last port."),
    ({"protocol": "tcp", "port_range_min": 70000}, "port_range_min", "The first port must be a port from 1 to 65535."),
    ({"protocol": "icmp", "port_range_min": 22}, "port_range_min", "Ports apply only to"),
    ({"protocol": "icmp", "icmp_code": 1}, "icmp_code", "An ICMP code needs an ICMP type."),
    ({"protocol": "tcp", "remote_ip_prefix": "2001:db8::/32"}, "remote_ip_prefix",
     "The remote prefix 2001:db8::/32 is not an IPv4 prefix"),
])
def test_refusals_name_the_field_and_say_it_in_words(rule, field, words):
    with pytest.raises(RuleError) as exc:
        canonicalize(direction="ingress", **rule)
    assert exc.value.field == field and str(exc.value).startswith(words), str(exc.value)
    assert "port_range" not in str(exc.value) and "icmp_type/" not in str(exc.value)
