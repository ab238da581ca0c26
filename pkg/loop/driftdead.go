package loop

// Reasons for ModelDrift (DriftState.Reason).
const (
	// DriftReasonGain: the slope or change test says the gain moved.
	DriftReasonGain = "gain"
	// DriftReasonDeadTime: the dead-time test says the delay moved.
	DriftReasonDeadTime = "dead_time"
)
