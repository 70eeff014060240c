# The descriptor classes as the generated .pyi files and quantd_client use
# them: names only.
from typing import Any, Mapping, Optional, Sequence

class DescriptorBase:
    name: str
    full_name: str
    def GetOptions(self) -> Any: ...

class FieldDescriptor(DescriptorBase):
    number: int
    type: int
    label: int
    json_name: str
    containing_type: Optional[Descriptor]
    message_type: Optional[Descriptor]
    enum_type: Optional[EnumDescriptor]

class OneofDescriptor(DescriptorBase):
    fields: Sequence[FieldDescriptor]

class EnumValueDescriptor(DescriptorBase):
    number: int
    index: int

class EnumDescriptor(DescriptorBase):
    values: Sequence[EnumValueDescriptor]
    values_by_name: Mapping[str, EnumValueDescriptor]
    values_by_number: Mapping[int, EnumValueDescriptor]

class Descriptor(DescriptorBase):
    fields: Sequence[FieldDescriptor]
    fields_by_name: Mapping[str, FieldDescriptor]
    oneofs: Sequence[OneofDescriptor]
    oneofs_by_name: Mapping[str, OneofDescriptor]
    nested_types: Sequence[Descriptor]
    enum_types: Sequence[EnumDescriptor]

class MethodDescriptor(DescriptorBase):
    input_type: Descriptor
    output_type: Descriptor

class ServiceDescriptor(DescriptorBase):
    methods: Sequence[MethodDescriptor]
    methods_by_name: Mapping[str, MethodDescriptor]

class FileDescriptor(DescriptorBase):
    package: str
    message_types_by_name: Mapping[str, Descriptor]
    enum_types_by_name: Mapping[str, EnumDescriptor]
    services_by_name: Mapping[str, ServiceDescriptor]
