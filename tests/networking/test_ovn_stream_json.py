"""The OVN driver's stream JSON parser must split and decode JSON-RPC messages exactly like ovs.json.Parser,
whatever the chunking (strings with brackets, escaped quotes and backslashes across chunk boundaries)."""
import json
import random

from apps.networking.drivers.ovn import _StreamJsonParser

MESSAGES = [
    {"id": 1, "result": [{"rows": [{"name": "a]b}c", "x": 'q"uote', "y": "back\\slash"}]}]},
    {"method": "update3", "params": ["x", {"ACL": {"u": {"insert": {"match": "ip4.dst == {1, 2}", "n": 5}}}}]},
    {"id": "echo", "result": []},
    {"s": '\\"[{', "unicode": "žluťoučký ☃", "nested": [[[], {}], [{"a": [1, 2.5, -3e2, True, None]}]]},
]


def _feed_all(text: str, rng: random.Random) -> list:
    out, parser, rest = [], None, text
    while rest:
        cut = rng.randint(1, 7)
        chunk, rest = rest[:cut], rest[cut:]
        while chunk:
            parser = parser or _StreamJsonParser()
            used = parser.feed(chunk)
            chunk = chunk[used:]
            if parser.is_done():
                out.append(parser.finish())
                parser = None
    return out


def test_random_chunking_matches_json_loads():
    text = "".join(json.dumps(m) for m in MESSAGES) + " " + json.dumps(MESSAGES[0])
    for seed in range(200):
        assert _feed_all(text, random.Random(seed)) == [*MESSAGES, MESSAGES[0]]


def test_bad_json_is_reported_as_a_string():
    parser = _StreamJsonParser()
    parser.feed('{"a": tru}')
    assert parser.is_done() and isinstance(parser.finish(), str)
