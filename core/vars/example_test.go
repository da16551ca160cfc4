package vars_test

import (
	"fmt"

	"khook.io/core/redact"
	"khook.io/core/vars"
)

func Example() {
	red := redact.New()
	set, err := vars.Resolve(vars.Options{
		Set:     []string{"APP=My-App"},
		Environ: []string{"KHOOK_SECRET_TOKEN=s3cr3t", "KHOOK_VAR_REGION=eu-west-1", "HOME=/root"},
	}, red)
	if err != nil {
		panic(err)
	}
	spec := []byte(`metadata:
  name: ${APP | lower | trunc 63}
region: ${REGION}
timeout: ${WINDOW:-5|printf "%sm"}
token: ${TOKEN|b64enc}
script: echo $${HOME}
missing: "${NOPE}"
`)
	res := vars.Substitute(spec, set, red)
	fmt.Print(red.String(string(res.Text)))
	for _, p := range res.Problems {
		fmt.Println(p)
	}
	// Output:
	// metadata:
	//   name: my-app
	// region: eu-west-1
	// timeout: 5m
	// token: ***
	// script: echo ${HOME}
	// missing: ""
	// 7:11: variable NOPE is not set (no --set, --var-file, KHOOK_VAR_NOPE or KHOOK_SECRET_NOPE, and no :-default)
}
