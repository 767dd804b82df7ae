"""Stack files read as the Pulumi CLI reads them, and YAML errors as one line that quotes nothing.

The Pulumi CLI reads `Pulumi.<stack>.yaml` with gopkg.in/yaml.v3 v3.0.1 (pulumi/pulumi
sdk/go/common/encoding/marshal.go). The vectors below are what that decoder's `resolve` (resolve.go)
makes of a plain scalar decoded into `any`, and its duplicate-key refusal (decode.go, `uniqueKeys`,
"mapping key ... already defined"). PyYAML's YAML 1.1 answer is noted where it differs: each such
row is a config `make plan` would have read differently from `pulumi up`.
"""

from __future__ import annotations

import math

import pytest
import yaml

from boundary import safe_yaml

GO_YAML_V3 = [
    # (plain scalar, what yaml.v3 decodes it to, PyYAML's YAML 1.1 answer where it differs)
    ("yes", "yes", True),
    ("Yes", "Yes", True),
    ("on", "on", True),
    ("off", "off", False),
    ("no", "no", False),
    ("y", "y", None),
    ("true", True, None),
    ("False", False, None),
    ("null", None, None),
    ("~", None, None),
    ("010", 8, None),  # the YAML 1.1 octal spelling is still decoded by v3 (resolve.go comment)
    ("0o17", 15, "0o17"),
    ("0x1F", 31, None),
    ("0b101", 5, None),
    ("-0b11", -3, None),
    ("1_000", 1000, None),
    ("08", 8.0, None),  # not octal: ParseInt fails, yamlStyleFloat matches
    ("1e3", 1000.0, "1e3"),
    ("1:30", "1:30", 90),  # sexagesimal is YAML 1.1 only
    (".5", 0.5, None),
    ("3.0", 3.0, None),
    ("v1.36.4", "v1.36.4", None),
    ("10.0.0.21", "10.0.0.21", None),
    ("2024-01-01", "2024-01-01", None),  # v3 makes a time.Time; no gpulab key takes one
]


@pytest.mark.parametrize("text, go, pyyaml", GO_YAML_V3, ids=[row[0] for row in GO_YAML_V3])
def test_plain_scalars_resolve_as_yaml_v3_does(text, go, pyyaml) -> None:
    document = safe_yaml.load_stack(f"value: {text}\n", "Pulumi.dev.yaml")
    assert document["value"] == go and type(document["value"]) is type(go)
    if pyyaml is not None:  # the row is one where the YAML 1.1 reading differs (so the test means something)
        assert yaml.safe_load(f"value: {text}\n")["value"] == pyyaml != go


def test_special_floats_and_quoted_scalars() -> None:
    document = safe_yaml.load_stack("a: .inf\nb: -.Inf\nc: .nan\nd: 'yes'\ne: \"010\"\nf: !!str 5\n", "x")
    assert document["a"] == math.inf and document["b"] == -math.inf and math.isnan(document["c"])
    assert document["d"] == "yes" and document["e"] == "010" and document["f"] == "5"


def test_merge_keys_still_work() -> None:
    assert safe_yaml.load_stack("base: &b {a: 1}\nx:\n  <<: *b\n  c: 2\n", "x")["x"] == {"a": 1, "c": 2}


@pytest.mark.parametrize(
    "text, line",
    [
        ("config:\n  gpulab:tenants: []\n  gpulab:tenants: []\n", 3),
        ("config:\n  gpulab:tenants:\n    - name: a\n      name: b\n", 4),
    ],
)
def test_duplicate_keys_are_refused_as_the_pulumi_cli_refuses_them(text, line) -> None:
    with pytest.raises(safe_yaml.YamlError) as raised:
        safe_yaml.load_stack(text, "Pulumi.dev.yaml")
    message = str(raised.value)
    assert message.startswith(f"Pulumi.dev.yaml: not valid YAML at line {line}") and "\n" not in message
    assert "is already set at line" in message and "duplicate keys" in message
    assert safe_yaml.load_all(text, "m")  # manifests keep PyYAML's reading (kubectl is another reader)


SECRET = "ghp_" + "A1b2C3d4" * 5  # a GitHub token shape (40 characters after the prefix)

BROKEN = [
    f"a: b\nsecret: {SECRET}: x: y\n",  # mapping values are not allowed here
    f"key: [{SECRET}, 2\nb: c\n",  # unclosed flow sequence
    f'key: "{SECRET}\n',  # unterminated quoted scalar
    f"a:\n\t{SECRET}: 1\n",  # a tab
    f"a: !!python/object {SECRET}\n",  # an unknown tag
    f"{SECRET}: 1\n{SECRET}: 2\n",  # a duplicate key (stack files)
]


@pytest.mark.parametrize("text", BROKEN, ids=range(len(BROKEN)))
@pytest.mark.parametrize("loader", [safe_yaml.load_all, safe_yaml.load_stack])
def test_a_syntax_error_is_one_line_that_quotes_nothing(loader, text) -> None:
    try:
        loader(text, "in.yaml")
    except safe_yaml.YamlError as error:
        message = str(error)
    else:
        assert loader is safe_yaml.load_all and text.startswith(SECRET)  # a duplicate key is fine for manifests
        return
    assert "\n" not in message and message.startswith("in.yaml: not valid YAML at line "), message
    assert SECRET[4:20] not in message, message


# --- aliases may not make a document larger than a file gpulab would read ---


def test_a_long_value_aliased_many_times_is_refused_before_it_is_built(tmp_path, monkeypatch) -> None:
    """Boundary: a stack file as written, read by make plan's loader. A 1 MiB name used by 100 tenants (99
    aliases, within MAX_ALIASES) expands to 100 MiB, which validation and redaction took 17 s to walk (and a
    9 MiB one minutes). The refusal comes from the composed node graph, before any Python object is built from
    it: building the document fails this test (no clock)."""
    import yaml

    from model.config import ConfigError, load_stack_file

    def built(*_args, **_kwargs):
        raise AssertionError("the aliased document was built: the refusal came after the expansion")

    tenant = "{name: %s, gpus: [{model: L4, count: 1}]}"
    lines = ["config:", "  gpulab:tenants:", "    - " + tenant % ("&n " + "x" * 2**20)]
    lines += ["    - " + tenant % "*n"] * 99
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(yaml.constructor.BaseConstructor, "construct_document", built)
    with pytest.raises(ConfigError) as raised:
        load_stack_file(path)
    assert str(raised.value) == (
        f"aliases (*name) expand it to more than {safe_yaml.MAX_BYTES} characters, more than a file gpulab "
        "reads: refused as an alias bomb; alias shorter values, or fewer times"
    )


def test_aliases_within_the_size_of_a_file_still_work() -> None:
    text = "a: &v " + "x" * 2**20 + "\nb: [*v, *v, *v]\n"
    assert len(safe_yaml.load_stack(text, "f")["b"][2]) == 2**20
