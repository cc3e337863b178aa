// SPDX-License-Identifier: Apache-2.0

package reshard

import "libreshard.dev/reshard/internal/rsw"

// LogLevel is a level of the library's log (rs_log_level), each including
// those before it. RESHARD_DEBUG sets it for the process; SetLogLevel
// overrides it. The lines go to RESHARD_DEBUG_FILE or stderr. Since 0.6.
type LogLevel int

// Log levels.
const (
	LogNone  LogLevel = 0
	LogWarn  LogLevel = 1
	LogInfo  LogLevel = 2
	LogTrace LogLevel = 3
)

// Log subsystems (RS_LOG_* bits), for SetLogLevel. Since 0.6.
const (
	LogContext   uint32 = 0x01
	LogLayout    uint32 = 0x02
	LogPlan      uint32 = 0x04
	LogExec      uint32 = 0x08
	LogTransport uint32 = 0x10
	LogAll       uint32 = 0xffffffff
)

// SetLogLevel logs at level for the subsystems (LogAll: every one) in the
// whole process, over RESHARD_DEBUG and RESHARD_DEBUG_SUBSYS. A level
// outside LogNone..LogTrace is refused (StatusInvalidArgument) and changes
// nothing. Since 0.6.
func SetLogLevel(level LogLevel, subsystems uint32) error {
	const op = "SetLogLevel"
	if err := cInts(op, []string{"level"}, int(level)); err != nil {
		return err
	}
	r, err := newResult(op)
	if err != nil {
		return err
	}
	defer rsw.Rsw_result_free(r)
	rsw.Rsw_log_set_level(r, int(level), int64(subsystems))
	return resultError(op, r)
}

// GetLogLevel returns the level and subsystems in force. Since 0.6.
func GetLogLevel() (LogLevel, uint32) {
	return LogLevel(rsw.Rsw_log_level()), uint32(rsw.Rsw_log_subsystems())
}
