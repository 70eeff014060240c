module github.com/quantd/quantd/client/go

go 1.19

// The oldest versions the client is built and tested with (Debian 12's
// packages; client/go/README.md "Building offline"). Newer ones work too:
// Go's minimal version selection takes the newest any module asks for.
require (
	github.com/golang/protobuf v1.5.2
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
