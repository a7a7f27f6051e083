"""A local SageMaker HyperPod control plane speaking the AWS wire protocol (JSON 1.1) on loopback."""
