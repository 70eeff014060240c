# mypy must refuse a JobSpec field that does not exist (model_url for
# model_uri): the generated .pyi spell out every constructor argument.
import quantd_client

spec = quantd_client.JobSpec(model_url="file:///models/m")  # expect: Unexpected keyword argument "model_url" for "JobSpec"
