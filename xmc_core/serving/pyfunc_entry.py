"""The MLflow "models from code" file of an xmc model: MLflow runs it to build the pyfunc.

Logged by :func:`xmc_core.serving.package.log_model` together with the ``xmc_core`` package
(``code_paths``) and the model folder (artifact ``xmc_model``); no pickle is involved.
"""

from mlflow.models import set_model

from xmc_core.serving.pyfunc import XmcPyfuncModel

set_model(XmcPyfuncModel())
