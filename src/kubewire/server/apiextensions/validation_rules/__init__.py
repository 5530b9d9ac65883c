"""CEL validation rules (x-kubernetes-validations): kube's environment and libraries on cel-
expr-python, compile with the cost estimate, evaluate with kube's messages.

Part of ``server.apiextensions`` (pure; see its docstring for what it may import).
"""
