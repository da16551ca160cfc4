// Command etcd is the etcd server, exactly as upstream's go.etcd.io/etcd/v3
// main: the server module has no main package and cannot be `go install`ed
// because of its replace directives.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
