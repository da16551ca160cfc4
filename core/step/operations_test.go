package step

import "testing"

// TestOperations: a run knows when another of its operations is on what
// one enters; a nil *Operations cannot tell.
func TestOperations(t *testing.T) {
	ops := &Operations{}
	alone, leave1 := ops.Enter("ns/app")
	if !alone {
		t.Fatal("the first operation is not alone")
	}
	if alone, leave2 := ops.Enter("ns/app"); alone {
		t.Fatal("a second operation on the same release is alone")
	} else {
		leave2()
		leave2() // leaving twice counts once
	}
	if alone, leave := ops.Enter("ns/other"); !alone {
		t.Fatal("an operation on another release is not alone")
	} else {
		leave()
	}
	leave1()
	if alone, leave := ops.Enter("ns/app"); !alone {
		t.Fatal("after both left, a new operation is not alone")
	} else {
		leave()
	}
	var none *Operations
	if alone, leave := none.Enter("ns/app"); alone {
		t.Fatal("a nil *Operations says alone")
	} else {
		leave()
	}
}
