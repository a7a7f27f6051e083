"""The AWS edge: boto3 clients and the botocore service model that is the authority for shapes."""
