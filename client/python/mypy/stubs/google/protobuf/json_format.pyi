from typing import Any, Dict, Optional, TypeVar

from google.protobuf.message import Error, Message

_M = TypeVar("_M", bound=Message)

class ParseError(Error): ...
class SerializeToJsonError(Error): ...

def MessageToJson(
    message: Message,
    including_default_value_fields: bool = ...,
    preserving_proto_field_name: bool = ...,
    indent: Optional[int] = ...,
    sort_keys: bool = ...,
    use_integers_for_enums: bool = ...,
    descriptor_pool: Any = ...,
    float_precision: Optional[int] = ...,
    ensure_ascii: bool = ...,
) -> str: ...
def MessageToDict(
    message: Message,
    including_default_value_fields: bool = ...,
    preserving_proto_field_name: bool = ...,
    use_integers_for_enums: bool = ...,
    descriptor_pool: Any = ...,
    float_precision: Optional[int] = ...,
) -> Dict[str, Any]: ...
def Parse(
    text: str | bytes,
    message: _M,
    ignore_unknown_fields: bool = ...,
    descriptor_pool: Any = ...,
    max_recursion_depth: int = ...,
) -> _M: ...
def ParseDict(
    js_dict: Any,
    message: _M,
    ignore_unknown_fields: bool = ...,
    descriptor_pool: Any = ...,
    max_recursion_depth: int = ...,
) -> _M: ...
