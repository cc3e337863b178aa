// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"errors"
	"testing"
)

func TestLogLevel(t *testing.T) {
	level, subsystems := GetLogLevel()
	defer SetLogLevel(level, subsystems)
	if err := SetLogLevel(LogInfo, LogPlan|LogExec); err != nil {
		t.Fatal(err)
	}
	if l, s := GetLogLevel(); l != LogInfo || s != LogPlan|LogExec {
		t.Fatalf("got %d %#x", l, s)
	}
	err := SetLogLevel(LogLevel(9), LogAll)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument {
		t.Fatalf("level 9: %v", err)
	}
	if l, _ := GetLogLevel(); l != LogInfo {
		t.Fatalf("a refused level changed it to %d", l)
	}
}
