-- Operators repair and retire GPU hosts from the support console; those
-- actions are audited in support_actions like support's (target_ref is
-- "host:" and the host's name).
-- +goose Up
-- +goose StatementBegin
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception', 'value_exception',
        'repair_host', 'retire_host'));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE support_actions DISABLE TRIGGER support_actions_guard;
DELETE FROM support_actions WHERE action IN ('repair_host', 'retire_host');
ALTER TABLE support_actions ENABLE TRIGGER support_actions_guard;
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception', 'value_exception'));
-- +goose StatementEnd
