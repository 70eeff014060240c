package quantd

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// codec marshals messages with google.golang.org/protobuf. grpc-go's own
// codec goes through github.com/golang/protobuf, which before v1.4 (Debian
// 12 ships v1.3.5) cannot handle the messages protoc-gen-go v1.28 writes;
// forcing this codec on the client's connection works with either.
type codec struct{}

func (codec) Name() string   { return "proto" }
func (codec) String() string { return "proto" }

func (codec) Marshal(v interface{}) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("quantd: cannot marshal %T: not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (codec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("quantd: cannot unmarshal into %T: not a protobuf message", v)
	}
	return proto.Unmarshal(data, m)
}
