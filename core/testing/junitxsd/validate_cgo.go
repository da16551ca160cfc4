//go:build cgo && libxml2

package junitxsd

import (
	"fmt"
	"sync"

	xsdvalidate "github.com/terminalstatic/go-xsd-validate"
)

var (
	once    sync.Once
	handler *xsdvalidate.XsdHandler
	initErr error
	mu      sync.Mutex
)

// Validate checks report against the JUnit schema; the error lists what
// libxml2 found wrong.
func Validate(report []byte) error {
	once.Do(func() {
		if initErr = xsdvalidate.Init(); initErr != nil {
			return
		}
		handler, initErr = xsdvalidate.NewXsdHandlerMem(schema, xsdvalidate.ParsErrVerbose)
	})
	if initErr != nil {
		return fmt.Errorf("junitxsd: load the schema: %w", initErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if err := handler.ValidateMem(report, xsdvalidate.ValidErrDefault); err != nil {
		return fmt.Errorf("the report is not valid against junit-10.xsd: %w", err)
	}
	return nil
}
