-- Argo CD health of an opsuite custom resource (PodSet, ConfigMapSync, SecretSync, PodDebugger),
-- read from the status its operator writes. Degraded when the Degraded condition is True (or a
-- PodSet's rollout passed its progressDeadlineSeconds), Suspended while a PodSet is paused
-- (Progressing reason Paused, as Argo CD shows a paused Deployment), Healthy when Ready is True,
-- otherwise Progressing; Progressing too until status.observedGeneration shows the current spec
-- seen.
local health = { status = "Progressing", message = "Waiting for the operator" }
if obj.status == nil or obj.status.conditions == nil then
  return health
end
local generation = obj.metadata.generation or 0
if (obj.status.observedGeneration or 0) < generation then
  health.message = "Waiting for the operator to see generation " .. generation
  return health
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Degraded" and condition.status == "True" then
    return { status = "Degraded", message = condition.message }
  end
  if condition.type == "Progressing" and condition.status == "False"
      and condition.reason == "ProgressDeadlineExceeded" then
    return { status = "Degraded", message = condition.message }
  end
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Progressing" and condition.reason == "Paused" then
    return { status = "Suspended", message = condition.message }
  end
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    if condition.status == "True" then
      return { status = "Healthy", message = condition.message }
    end
    health.message = condition.message
  end
end
return health
