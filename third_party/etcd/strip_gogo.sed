# Makes etcd 3.4's .proto files compile with plain protoc: drops the gogoproto
# and grpc-gateway imports, their file options, the google.api.http method
# annotations (multi-line blocks) and any inline [(gogoproto.x) = y] field
# option. Messages, fields and services are left exactly as they are.
/^import "gogoproto\/gogo\.proto";/d
/^import "google\/api\/annotations\.proto";/d
/^option (gogoproto\./d
/option (google\.api\.http) = {/,/};/d
s/ *\[(gogoproto\.[^]]*\]//
