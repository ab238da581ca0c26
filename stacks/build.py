"""Build stacks/controller.yaml and stacks/consumer.yaml from template.yaml.

template.yaml (the quick start: one stack, one loop) holds every piece; the
controller stack takes the table, the controller and the alarms over every
loop, the consumer stack one loop's SQS consumer attached to a controller
stack's table. The shared parameters and resources are copied from
template.yaml, so they cannot drift:

    python3 stacks/build.py           # write both files
    python3 stacks/build.py --check   # exit 1 when a file is not what it builds (make iac-scan)
"""

import os
import sys
ROOT=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src=open(os.path.join(ROOT, 'template.yaml'), encoding='utf-8').read()
lines=src.split('\n')

def section(name):
    i=lines.index(name+':')
    j=i+1
    while j<len(lines) and (lines[j]=='' or lines[j].startswith(' ') or lines[j].startswith('#')):
        j+=1
    return lines[i+1:j]

def entry(sec, key):
    L=section(sec)
    for i,l in enumerate(L):
        if l=='  '+key+':':
            j=i+1
            while j<len(L) and not (L[j].startswith('  ') and not L[j].startswith('   ') and not L[j].strip().startswith('#')) :
                j+=1
            # strip trailing blank/comment lines that belong to the next entry
            while j>i+1 and (L[j-1].strip()=='' or L[j-1].strip().startswith('#')):
                j-=1
            return '\n'.join(L[i:j])+'\n'
    raise KeyError(key)

TABLE_ARN='arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${TableName}'
def consumerize(t):
    t=t.replace('!GetAtt Table.Arn','!Sub "%s"'%TABLE_ARN)
    t=t.replace('"${Table.Arn}/index/by-sk"','"%s/index/by-sk"'%TABLE_ARN)
    t=t.replace('!Ref Table\n','!Ref TableName\n')
    t=t.replace('!GetAtt ConsumerQueue.Arn','!If [CreateQueue, !GetAtt ConsumerQueue.Arn, !Ref ExistingQueueArn]')
    t=t.replace('!GetAtt ConsumerQueue.QueueName','!If [CreateQueue, !GetAtt ConsumerQueue.QueueName, !Select [5, !Split [":", !Ref ExistingQueueArn]]]')
    t=t.replace('SLUICE_QUEUE_URL: !Ref ConsumerQueue','SLUICE_QUEUE_URL: !If [CreateQueue, !Ref ConsumerQueue, !Sub ["https://sqs.${Region}.${AWS::URLSuffix}/${Account}/${Name}", {Region: !Select [3, !Split [":", !Ref ExistingQueueArn]], Account: !Select [4, !Split [":", !Ref ExistingQueueArn]], Name: !Select [5, !Split [":", !Ref ExistingQueueArn]]}]]')
    t=t.replace('    Condition: HasConsumers\n','')
    return t


HEADER_CONSUMER='''# Built by stacks/build.py from template.yaml's pieces: edit those (or
# build.py), then run `python3 stacks/build.py`; `make iac-scan` checks it.
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Description: >-
  Sluice consumer stack: one loop's SQS consumer (a queue it creates or one
  that exists, by ARN), attached to a controller stack (stacks/controller.yaml)
  by that stack's TableName output. One such stack per queue; each names its
  loop (LoopId), whose RATE its consumers read and whose leases they write.

'''
def params_consumer():
    out='Parameters:\n'
    out+='''  LoopId:
    Type: String
    AllowedPattern: "^[a-zA-Z0-9_.-]{1,128}$"
    ConstraintDescription: letters, digits, _ . - (no # or wildcard, which would widen the consumers' lease condition)
    Description: >-
      The loop of this stack's consumers (their SLUICE_LOOP): the RATE they
      read and the leases they write, which their role is limited to. Create
      its PARAMS item in the controller's table (docs/controller.md).
  TableName:
    Type: String
    AllowedPattern: "[a-zA-Z0-9_.-]{3,255}"
    Description: The controller stack's table (its output TableName).
  ExistingQueueArn:
    Type: String
    Default: ""
    AllowedPattern: "^$|^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[a-zA-Z0-9_-]{1,80}$"
    Description: >-
      ARN of a queue that exists (its producers, retention and redrive stay
      as they are); empty: the stack creates one (QueueName). Poison messages
      go with their reason to the stack's own dead-letter queue either way.
      A queue encrypted with a customer managed KMS key needs kms:Decrypt
      for the consumer's role in that key's policy (not granted here).
  QueueName:
    Type: String
    Default: ""
    AllowedPattern: "^$|^[a-zA-Z0-9_-]{1,76}$"
    Description: Name of the queue the stack creates (with ExistingQueueArn empty); empty for a generated name.
'''
    for k in ['QueueRetentionPeriod','QueueMaxMessageAge','AlarmTopicArn','ConsumerMaxConcurrency','ConsumerSafeRate','ConsumerMaxReceiveCount']:
        out+=entry('Parameters',k)
    out+='''  ConsumerSink:
    Type: String
    Default: mysql
    AllowedValues: [mysql, http]
    Description: Where the consumers store messages.
'''
    for k in ['ConsumerMySQLSecretName','ConsumerMySQLHost','ConsumerMySQLPort','ConsumerMySQLDatabase','ConsumerMySQLCA','ConsumerMySQLTLS','ConsumerMySQLMaxOpen','ConsumerMySQLMaxIdle','ConsumerMySQLConnLifetime','ConsumerMySQLAuth','ConsumerMySQLUser','ConsumerMySQLDBUserArn','ConsumerMySQLStatement','ConsumerMySQLPrefix','ConsumerMySQLInboxRetention','ConsumerHTTPEndpoints','ConsumerHTTPAuthSecret','ConsumerSubnetIds','ConsumerSecurityGroupIds']:
        out+=entry('Parameters',k)
    return out

def rules(keys):
    return 'Rules:\n'+''.join(entry('Rules',k) for k in keys)

def consumer():
    out=HEADER_CONSUMER+params_consumer()+'\n'+rules(['MySQLSinkNeedsSecret','HttpSinkNeedsEndpoints','MySQLIAMNeedsUserAndTLS'])
    out+='''
Conditions:
  HasAlarmTopic: !Not [!Equals [!Ref AlarmTopicArn, ""]]
  IsMySQLSink: !Equals [!Ref ConsumerSink, mysql]
  IsMySQLIAM: !And
    - !Condition IsMySQLSink
    - !Equals [!Ref ConsumerMySQLAuth, iam]
    - !Not [!Equals [!Ref ConsumerMySQLDBUserArn, ""]]
  UsesMySQLSecret: !And
    - !Condition IsMySQLSink
    - !Equals [!Ref ConsumerMySQLAuth, password]
  MySQLSecretIsArn: !Equals [!Select [0, !Split [":", !Ref ConsumerMySQLSecretName]], arn]
  UsesHTTPAuthSecret: !And
    - !Equals [!Ref ConsumerSink, http]
    - !Not [!Equals [!Ref ConsumerHTTPAuthSecret, ""]]
  HTTPAuthSecretIsArn: !Equals [!Select [0, !Split [":", !Ref ConsumerHTTPAuthSecret]], arn]
  HasConsumerVpc: !Not [!Equals [!Join ["", !Ref ConsumerSubnetIds], ""]]
  CreateQueue: !Equals [!Ref ExistingQueueArn, ""]
  HasQueueName: !Not [!Equals [!Ref QueueName, ""]]

'''
    out+=section_text('Globals')
    out+='\nResources:\n'
    dlq=consumerize(entry('Resources','ConsumerDeadLetterQueue')).replace('QueueName: !Sub "${QueueName}-dlq"','QueueName: !If [HasQueueName, !Sub "${QueueName}-dlq", !Ref AWS::NoValue]')
    q=consumerize(entry('Resources','ConsumerQueue')).replace('    Type: AWS::SQS::Queue\n','    Type: AWS::SQS::Queue\n    Condition: CreateQueue\n',1).replace('QueueName: !Ref QueueName','QueueName: !If [HasQueueName, !Ref QueueName, !Ref AWS::NoValue]')
    out+=dlq+'\n'+q
    for k in ['SqsConsumerFunction','SqsConsumerRole','SqsConsumerLogGroup','ConsumerDeadLettersAlarm','ConsumerErrorsAlarm','ConsumerThrottlesAlarm','QueueOldestMessageAlarm','ConsumerRateFallbackAlarm']:
        out+='\n'+consumerize(entry('Resources',k))
    out+='''
Outputs:
  LoopId:
    Description: The loop of this stack's consumers.
    Value: !Ref LoopId
  QueueArn:
    Description: The queue the consumers drain.
    Value: !If [CreateQueue, !GetAtt ConsumerQueue.Arn, !Ref ExistingQueueArn]
  DeadLetterQueueUrl:
    Description: The consumers' dead-letter queue (poison messages with their reason).
    Value: !Ref ConsumerDeadLetterQueue
  MappingUUID:
    Description: UUID of the consumer's event source mapping (esm_uuid in the loop's PARAMS).
    Value: !Ref SqsConsumerFunctionQueue
  MappingArn:
    Description: ARN of the mapping, for the controller stack's ManagedMappingArns.
    Value: !Sub "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:event-source-mapping:${SqsConsumerFunctionQueue}"
  FunctionName:
    Description: The consumer function.
    Value: !Ref SqsConsumerFunction
  FunctionArn:
    Description: ARN of the consumer function, for the controller stack's ManagedFunctionArns.
    Value: !GetAtt SqsConsumerFunction.Arn
'''
    return out

def section_text(name):
    return name+':\n'+'\n'.join(section(name)).rstrip('\n')+'\n'

HEADER_CONTROLLER='''# Built by stacks/build.py from template.yaml's pieces: edit those (or
# build.py), then run `python3 stacks/build.py`; `make iac-scan` checks it.
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Description: >-
  Sluice controller stack: the loops' table, the scheduled controller that
  ticks every loop in it, alarms and a dashboard over every loop. Deploy it
  once; each queue's consumers are a consumer stack (stacks/consumer.yaml)
  given this stack's TableName output.

'''
def controller():
    out=HEADER_CONTROLLER+'Parameters:\n'
    out+=entry('Parameters','TableName')
    for k in ['ScheduleExpression','MetricsNamespace','ControllerReservedConcurrency','AlarmTopicArn','ControllerPrometheusURL','ControllerSubnetIds','ControllerSecurityGroupIds']:
        out+=entry('Parameters',k)
    out+='''  ManagedMappingArns:
    Type: CommaDelimitedList
    Default: ""
    Description: >-
      Event source mappings the controller may read and resize (loops with
      esm_uuid): their ARNs, arn:aws:lambda:REGION:ACCOUNT:event-source-mapping:UUID
      (a consumer stack's output MappingArn, or the mapping of an existing
      function without Sluice code: esm_function, docs/consumers.md); empty
      for none.
  ManagedFunctionArns:
    Type: CommaDelimitedList
    Default: ""
    Description: >-
      The functions of those mappings (a consumer stack's output
      FunctionArn), which the controller invokes with a probe event while
      it holds a mapping off for an outage of the destination; empty: it
      probes by turning the mapping on for a tick.
'''
    out+='\n'+rules(['ControllerSubnetsNeedGroups'])
    out+='''
Conditions:
  HasAlarmTopic: !Not [!Equals [!Ref AlarmTopicArn, ""]]
  HasControllerVpc: !Not [!Equals [!Join ["", !Ref ControllerSubnetIds], ""]]
  HasTableName: !Not [!Equals [!Ref TableName, ""]]
  HasManagedMappings: !Not [!Equals [!Join ["", !Ref ManagedMappingArns], ""]]
  HasManagedFunctions: !Not [!Equals [!Join ["", !Ref ManagedFunctionArns], ""]]

'''
    out+=section_text('Globals')+'\nResources:\n'
    out+=entry('Resources','Table')
    out+='\n'+entry('Resources','ControllerFunction')
    role=entry('Resources','ControllerRole')
    i=role.index('              # The coarse actuator')
    role=role[:i]+'''              # The coarse actuator: loops whose PARAMS name a mapping
              # (esm_uuid) get its MaximumConcurrency set, or turned off and
              # on. The mappings named in ManagedMappingArns only.
              - !If
                - HasManagedMappings
                - Sid: ScaleMappings
                  Effect: Allow
                  Action:
                    - lambda:GetEventSourceMapping
                    - lambda:UpdateEventSourceMapping
                  Resource: !Ref ManagedMappingArns
                - !Ref AWS::NoValue
              # The outage hold's probe: the functions named in
              # ManagedFunctionArns only.
              - !If
                - HasManagedFunctions
                - Sid: ProbeMappingFunctions
                  Effect: Allow
                  Action:
                    - lambda:InvokeFunction
                  Resource: !Ref ManagedFunctionArns
                - !Ref AWS::NoValue
'''
    out+='\n'+role
    for k in ['ControllerLogGroup','ControllerErrorsAlarm','LoopErrorsAlarm','StaleMetricAlarm']:
        out+='\n'+entry('Resources',k)
    out+='''
  RatePinnedAtMinAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmDescription: >-
        Some loop has been held at its minimum rate in each of the last 15
        minutes: its destination stays above the setpoint even at the lowest
        rate (its queue grows), or it is tuned badly. The dashboard's
        "At minimum" widget names the loop.
      Metrics:
        - Id: atmin
          Expression: !Sub 'SELECT MAX(AtMinRate) FROM SCHEMA("${MetricsNamespace}", Loop)'
          Period: 60
          ReturnData: true
      EvaluationPeriods: 15
      DatapointsToAlarm: 15
      Threshold: 1
      ComparisonOperator: GreaterThanOrEqualToThreshold
      TreatMissingData: notBreaching
      AlarmActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref "AWS::NoValue"]
      OKActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref "AWS::NoValue"]

  # A stopped controller ticks no loop: its own invocations say so for all.
  ControllerSilentAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmDescription: >-
        The controller ran no tick for 5 minutes (schedule disabled, function
        throttled or failing before it runs): no loop's RATE is renewed, and
        every loop's consumers fall back to their safe rate.
      Namespace: AWS/Lambda
      MetricName: Invocations
      Dimensions:
        - Name: FunctionName
          Value: !Ref ControllerFunction
      Statistic: Sum
      Period: 60
      EvaluationPeriods: 5
      Threshold: 1
      ComparisonOperator: LessThanThreshold
      TreatMissingData: breaching
      AlarmActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref "AWS::NoValue"]
      OKActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref "AWS::NoValue"]

  # Every widget a search over the Loop dimension: a loop added later
  # appears without a stack update.
  Dashboard:
    Type: AWS::CloudWatch::Dashboard
    Properties:
      DashboardName: !Sub "${AWS::StackName}-sluice"
      DashboardBody: !Sub |
        {
          "widgets": [
            {"type": "metric", "x": 0, "y": 0, "width": 12, "height": 6,
             "properties": {"title": "Measured CPU, every loop", "view": "timeSeries", "region": "${AWS::Region}", "period": 60,
               "yAxis": {"left": {"min": 0, "max": 100, "label": "%"}},
               "metrics": [[{"expression": "SEARCH('{${MetricsNamespace},Loop} MetricName=\\"MeasuredCPU\\"', 'Average', 60)", "id": "cpu"}]]}},
            {"type": "metric", "x": 12, "y": 0, "width": 12, "height": 6,
             "properties": {"title": "Setpoint, every loop", "view": "timeSeries", "region": "${AWS::Region}", "period": 60,
               "metrics": [[{"expression": "SEARCH('{${MetricsNamespace},Loop} MetricName=\\"Setpoint\\"', 'Average', 60)", "id": "setpoint"}]]}},
            {"type": "metric", "x": 0, "y": 6, "width": 12, "height": 6,
             "properties": {"title": "Allowed rate, messages/s, every loop", "view": "timeSeries", "region": "${AWS::Region}", "period": 60,
               "metrics": [[{"expression": "SEARCH('{${MetricsNamespace},Loop} MetricName=\\"AllowedRate\\"', 'Average', 60)", "id": "rate"}]]}},
            {"type": "metric", "x": 12, "y": 6, "width": 12, "height": 6,
             "properties": {"title": "Stale, at minimum, errors, every loop", "view": "timeSeries", "region": "${AWS::Region}", "period": 60,
               "yAxis": {"left": {"min": 0, "max": 1}},
               "metrics": [
                 [{"expression": "SEARCH('{${MetricsNamespace},Loop} MetricName=\\"Stale\\"', 'Maximum', 60)", "id": "stale"}],
                 [{"expression": "SEARCH('{${MetricsNamespace},Loop} MetricName=\\"AtMinRate\\"', 'Maximum', 60)", "id": "atmin"}],
                 [{"expression": "SEARCH('{${MetricsNamespace},Loop} MetricName=\\"LoopError\\"', 'Maximum', 60)", "id": "errors"}]
               ]}},
            {"type": "metric", "x": 0, "y": 12, "width": 12, "height": 6,
             "properties": {"title": "Consumers on their safe rate, every loop", "view": "timeSeries", "region": "${AWS::Region}", "period": 60,
               "metrics": [[{"expression": "SEARCH('{Sluice/Consumer,Loop} MetricName=\\"RateFallback\\"', 'Maximum', 60)", "id": "fallback"}]]}},
            {"type": "metric", "x": 12, "y": 12, "width": 12, "height": 6,
             "properties": {"title": "Controller function", "view": "timeSeries", "region": "${AWS::Region}", "period": 60,
               "metrics": [
                 ["AWS/Lambda", "Invocations", "FunctionName", "${ControllerFunction}", {"stat": "Sum"}],
                 ["AWS/Lambda", "Errors", "FunctionName", "${ControllerFunction}", {"stat": "Sum"}],
                 ["AWS/Lambda", "Duration", "FunctionName", "${ControllerFunction}", {"stat": "Maximum", "yAxis": "right"}]
               ]}},
            {"type": "alarm", "x": 0, "y": 18, "width": 24, "height": 3,
             "properties": {"title": "Alarms", "alarms": ["${ControllerErrorsAlarm.Arn}", "${LoopErrorsAlarm.Arn}", "${StaleMetricAlarm.Arn}", "${RatePinnedAtMinAlarm.Arn}", "${ControllerSilentAlarm.Arn}"]}}
          ]
        }

Outputs:
  TableName:
    Description: The loops' table (a consumer stack's TableName; SLUICE_TABLE for the tools).
    Value: !Ref Table
    Export:
      Name: !Sub "${AWS::StackName}-TableName"
  TableArn:
    Description: ARN of the table.
    Value: !GetAtt Table.Arn
    Export:
      Name: !Sub "${AWS::StackName}-TableArn"
  ControllerFunctionName:
    Description: The controller Lambda.
    Value: !Ref ControllerFunction
  DashboardURL:
    Description: The CloudWatch dashboard of every loop.
    Value: !Sub "https://${AWS::Region}.console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}#dashboards:name=${AWS::StackName}-sluice"
'''
    return out


def main(argv):
    check = "--check" in argv[1:]
    stale = []
    for name, text in (("controller.yaml", controller()), ("consumer.yaml", consumer())):
        path = os.path.join(ROOT, "stacks", name)
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        print("not built from template.yaml (run python3 stacks/build.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
