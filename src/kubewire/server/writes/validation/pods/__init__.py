"""Pod validation, the largest of kube's per-group rule sets, in parts: pure functions.

``spec`` is ``ValidatePodSpec`` and the pod's create/update/ephemeral-container rules (kube's
``pkg/apis/core/validation/validation.go``), calling the parts: ``containers`` (volume devices,
resize policy), ``env`` (env ``valueFrom``), ``probes`` (probe and lifecycle handlers),
``security`` (sysctls, seccomp, AppArmor), ``scheduling`` (affinity, topology spread, label
selectors) and ``spec_rules`` (host aliases, ``os``). Each module's docstring names the kube
functions it follows. Objects in, ``FieldError`` lists out; it imports the rest of
``validation`` and the shared core only.
"""
